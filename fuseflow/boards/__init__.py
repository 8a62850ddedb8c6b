"""FPGA boards: synthesis reports, a UART host bridge and its client, board builds (ULX3S-85F, iCEBreaker).

- :mod:`.protocol`: the bridge's byte protocol (shared by gateware and client).
- :mod:`.bridge`: UART + command parser gateware mapped onto a kernel top's host port.
- :mod:`.client`: the host-side client over an abstract byte transport (serial port or simulation).
- :mod:`.simboard`: the kernel top + bridge in Amaranth's simulator with a bit-level host UART.
- :mod:`.platforms`: board tops (kernel top + bridge on the board's UART pins and clock).
- :mod:`.synth`: Yosys + nextpnr (YoWASP) runs returning utilisation, Fmax and the critical path.

``python -m fuseflow.boards`` is the command line (docs/boards.md).
"""
