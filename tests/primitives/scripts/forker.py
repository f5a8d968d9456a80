"""Test fixture: leaves a grandchild behind that keeps stdout open and sleeps.

usage: forker.py PIDFILE MODE
  MODE wait   - the parent sleeps too (for timeouts and cancellation)
  MODE exit   - the parent exits at once, leaving the grandchild in its process group
  MODE escape - like exit, but the grandchild calls setsid() and leaves the group
The grandchild's pid is written to PIDFILE once it is running.
"""

import os
import sys
import time

pidfile, mode = sys.argv[1], sys.argv[2]

if os.fork() == 0:  # child: fork again and exit, so the grandchild is orphaned (double fork)
    if os.fork() == 0:
        if mode == "escape":
            os.setsid()
        with open(pidfile + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(pidfile + ".tmp", pidfile)
        time.sleep(300)  # stdout and stderr stay open all along
    os._exit(0)

os.wait()
while not os.path.exists(pidfile):
    time.sleep(0.005)
print("started", flush=True)
if mode == "wait":
    time.sleep(300)
