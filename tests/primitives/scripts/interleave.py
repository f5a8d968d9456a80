"""Test fixture: writes SIZE_MB mebibytes to stdout and to stderr, alternating, so that a
reader draining one pipe after the other would deadlock."""

import sys

chunk = b"o" * (1 << 20), b"e" * (1 << 20)
for _ in range(int(sys.argv[1])):
    sys.stdout.buffer.write(chunk[0])
    sys.stderr.buffer.write(chunk[1])
