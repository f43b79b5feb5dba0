"""Virtual time: experiments inside a User-Mode Linux (UML) kernel with time travel.

With ``time-travel=inf-cpu`` UML's clock advances only when every process in it is idle, so
computing takes no time: a cell simulated by ns-3, an aioquic endpoint or a busy host never
falls behind the clock, and a run's figures do not depend on the machine's load. UML is a
kernel that runs as ordinary host processes (no module, no KVM) and sees the host's files
through ``hostfs``, so the same Python, quicbed and working directory are used inside.

- :mod:`quicbed.host.uml.build` builds the kernel once from Debian's ``linux-source-6.12``
  with this folder's ``kernel.config`` and ``xsave-size.patch`` into /var/lib/quicbed/uml.
- :mod:`quicbed.host.uml.boot` runs a command inside it (``run_in_uml``), as
  :mod:`quicbed.host.vm` runs one in the QEMU microVM; the job folder, the job script and
  the supervision of the host processes are shared with it.
"""
