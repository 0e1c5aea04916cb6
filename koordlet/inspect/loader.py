"""Compile and load the BPF program, then hand its descriptors to koordlet and exit.

Run by ``program.load`` as ``python -m koordlet.inspect.loader FD`` with the program text on
stdin and FD a Unix socket to koordlet: the reply is "ok" with the three program descriptors
(in ``program.TRACEPOINTS`` order) and the histogram map's, or "error: <why>". bcc and LLVM,
over 100 MiB of memory, live only as long as this process.
"""

from __future__ import annotations

import os
import socket
import sys

from koordlet.inspect.program import TRACEPOINTS


def compile_and_send(sock: socket.socket, text: str) -> None:
    try:
        from bcc import BPF  # noqa: PLC0415 - only here, in the short-lived child
    except ImportError as err:
        sock.sendall(
            f"error: bcc is not installed ({err}); Debian: apt install python3-bpfcc".encode()
        )
        return
    try:
        bpf = BPF(text=text)
        programs = [bpf.load_func(f"on_{tp}", BPF.RAW_TRACEPOINT).fd for tp in TRACEPOINTS]
        hist = bpf["hist"].map_fd
    except Exception as err:  # bcc raises plain Exceptions for compile and load errors
        sock.sendall(f"error: cannot load the BPF program: {err}".encode())
        return
    socket.send_fds(sock, [b"ok"], [*programs, hist])


def main() -> int:
    os.nice(19)  # compiling is a burst of CPU: let every service on the node go first
    with socket.socket(fileno=int(sys.argv[1])) as sock:
        compile_and_send(sock, sys.stdin.read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
