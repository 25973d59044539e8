#!/bin/sh
echo "CUnit was not found when configure ran: install it (Debian: apt-get install libcunit1-dev) and run configure again" >&2
exit 99
