#!/bin/bash
# A job whose processes do not stay under its leader (for the worker-death tests).
#
# Attempt 1 starts, and writes to OUT/pids-1.txt once all of them run:
#   the shell itself (the job's leader), a background `sleep` (the shell's child), a Python
#   child that ignores SIGTERM, an orphan (a double fork: its parent exits, so it is
#   reparented like a DataLoader worker whose parent died), and a process that left the
#   group with setsid. Then it waits.
# A later attempt writes OUT/survivors-N.txt: the pids of attempt 1 still alive when it
# started (a retry must never run beside them), and exits 0.
out=$1
python=$2
attempt=${TRACKER_ATTEMPT:-1}
if [ "$attempt" != 1 ]; then
  survivors=""
  for p in $(cat "$out/pids-1.txt"); do
    if [ -e "/proc/$p" ] && ! grep -q ') Z ' "/proc/$p/stat" 2>/dev/null; then
      survivors="$survivors $p"
    fi
  done
  echo "$survivors" > "$out/survivors-$attempt.txt"
  exit 0
fi
sleep 600 &
bg=$!
"$python" -c '
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(600)' "$out/stubborn.pid" &
"$python" -c '
import os, sys, time
if os.fork() == 0:
    open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    time.sleep(600)
os._exit(0)' "$out/orphan.pid"
"$python" -c '
import os, sys, time
os.setsid()
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(600)' "$out/escaped.pid" &
for f in stubborn orphan escaped; do
  while [ ! -s "$out/$f.pid" ]; do sleep 0.05; done
done
echo "$$ $bg $(cat "$out/stubborn.pid") $(cat "$out/orphan.pid") $(cat "$out/escaped.pid")" \
  > "$out/pids-1.tmp"
mv "$out/pids-1.tmp" "$out/pids-1.txt"
wait
