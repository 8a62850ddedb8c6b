"""The bridge gateware in Amaranth's simulator, driven bit by bit through the host-side UART model."""

import pytest

from fuseflow.boards import protocol as P
from fuseflow.boards.client import BridgeClient, BridgeError
from fuseflow.errors import HardwareError

from .conftest import RUN_CYCLES


def layout():
    return P.Layout(1, 1, 4)


def test_ident(fake_board):
    board = fake_board(build_id=0xCAFEF00D)
    board.write([P.CMD_IDENT])
    info = P.parse_ident(board.read(P.IDENT_BYTES))
    assert info == {"version": P.VERSION, "layout": layout(), "build_id": 0xCAFEF00D}
    assert board.framing_errors == 0


def test_write_then_read_burst(fake_board):
    board = fake_board()
    words = [0, 1, 0xFFFFFFFF, 0x80000000, 0x12345678, 7]
    board.write(P.encode_write(layout(), 0, 3, words))
    assert board.read(1) == bytes([P.ACK])
    board.write(P.encode_read(layout(), 0, 3, len(words)))
    assert P.decode_words(layout(), board.read(4 * len(words))) == words
    # a single word in the middle, and the register file (sel 1)
    board.write(P.encode_read(layout(), 0, 5, 1))
    assert P.decode_words(layout(), board.read(4)) == [0xFFFFFFFF]
    board.write(P.encode_read(layout(), 1, 2, 3))
    assert P.decode_words(layout(), board.read(12)) == [0x1002, 0x1003, 0x1004]


def test_zero_length_commands(fake_board):
    board = fake_board()
    board.write(P.encode_write(layout(), 0, 0, []))
    assert board.read(1) == bytes([P.ACK])
    board.write(P.encode_read(layout(), 0, 0, 0))        # no reply; the next command still works
    board.write([P.CMD_STATUS])
    assert board.read(1) == bytes([0])


def test_start_status_done_cycles(fake_board):
    board = fake_board()
    board.write([P.CMD_STATUS])
    assert board.read(1)[0] == 0                  # idle, not done
    board.write([P.CMD_START])
    assert board.read(1) == bytes([P.ACK])
    board.idle(RUN_CYCLES)
    board.write([P.CMD_STATUS])
    assert board.read(1)[0] == P.STATUS_DONE
    board.write([P.CMD_CYCLES])
    assert int.from_bytes(board.read(4), "little") == RUN_CYCLES


def test_busy_kernel_refuses_start_and_writes(fake_board):
    board = fake_board(run_cycles=3000)
    board.write(P.encode_write(layout(), 0, 0, [11]))
    assert board.read(1) == bytes([P.ACK])
    board.write([P.CMD_START])
    assert board.read(1) == bytes([P.ACK])
    board.write([P.CMD_STATUS])
    assert board.read(1)[0] == P.STATUS_BUSY
    board.write([P.CMD_START])
    assert board.read(1) == bytes([P.BUSY])
    board.write(P.encode_write(layout(), 0, 0, [99, 98]))
    assert board.read(1) == bytes([P.BUSY])     # the top ignored the words
    board.idle(3000 // 4)
    board.write([P.CMD_STATUS])
    assert board.read(1)[0] == P.STATUS_DONE
    board.write(P.encode_read(layout(), 0, 0, 2))
    assert P.decode_words(layout(), board.read(8)) == [11, 0]


def test_unknown_command_naks(fake_board):
    board = fake_board()
    board.write(b"x")
    assert board.read(1) == bytes([P.NAK])
    board.write([P.CMD_STATUS])
    assert board.read(1) == bytes([0])


def test_incomplete_command_times_out(fake_board):
    board = fake_board(timeout_bits=32)
    board.write(bytes([P.CMD_WRITE, 0, 2]))      # header cut short: sel, addr, then silence
    board.idle(80)
    board.write([P.CMD_IDENT])                    # parsed as a new command after the timeout
    assert P.parse_ident(board.read(P.IDENT_BYTES))["layout"] == layout()


def test_framing_error_byte_is_dropped(fake_board):
    board = fake_board()
    ctx_bits = []

    # send 'Q' with a broken stop bit by hand: start, 8 data bits, stop = 0, then idle high
    async def bad_byte(ctx):
        d = board.divisor
        for bit in [0] + [(P.CMD_STATUS >> i) & 1 for i in range(8)] + [0]:
            ctx.set(board.dut.rx, bit)
            for _ in range(d):
                await ctx.tick()
        ctx.set(board.dut.rx, 1)
        ctx_bits.append(True)
    board.sim.add_testbench(bad_byte)
    board.idle(30)
    assert ctx_bits
    assert board._rx == bytearray()              # no reply to the broken byte
    board.write([P.CMD_STATUS])
    assert board.read(1) == bytes([0])


def test_client_over_simulated_uart(fake_board, manifest):
    board = fake_board()
    client = BridgeClient(board, manifest, clock_hz=board.clock_hz)
    client.build_id = 0x12345678                 # the fake bridge's id (the manifest is hand-made)
    assert client.connect()["build_id"] == 0x12345678
    client.load({"M.vals": [5, 6, 7, 0xDEADBEEF]})
    assert client.read(0, 0, 4) == [5, 6, 7, 0xDEADBEEF]
    client.start()
    assert client.wait(max_cycles=1000)
    assert client.cycles() == RUN_CYCLES
    assert client.registers() == {"status": 0x1000, "cycles": 0x1001, "wall_cycles": 0x1002}


def test_client_detects_other_bitstream(fake_board, manifest):
    board = fake_board(build_id=1)
    client = BridgeClient(board, manifest, clock_hz=board.clock_hz)
    with pytest.raises(BridgeError, match="another bitstream"):
        client.connect()


def test_divisor_below_four_is_refused():
    from fuseflow.boards.bridge import UARTRx, UARTTx
    with pytest.raises(HardwareError, match="below 4"):
        UARTRx(3)
    with pytest.raises(HardwareError, match="below 4"):
        UARTTx(2)
