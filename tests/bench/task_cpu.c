/*
 * tests/bench/task-cpu.sh's task: what the task cost before its program
 * ran, as the kernel counts it. A process's CPU time and page faults start
 * at its fork and carry across exec, so at the top of main they hold all
 * that slurmstepd's child did for this task (Slurm's part and every SPANK
 * plugin's task callbacks), the exec, and the program's loading.
 */
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

int main(void)
{
	struct timespec cpu;
	struct rusage usage;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu) < 0 ||
	    getrusage(RUSAGE_SELF, &usage) < 0) {
		perror("task_cpu");
		return 1;
	}
	printf("%ld %lld\n", usage.ru_minflt,
	       (long long)cpu.tv_sec * 1000000000LL + cpu.tv_nsec);
	return 0;
}
