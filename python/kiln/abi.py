"""abi.py — the artifact ABI (include/kiln/artifact.h, version 1.4) in ctypes,
and the checks of a file before it is loaded (those of rt/loader.c).

Only layouts live here: model.py reads them. A loader must refuse, with a
message naming the file, what dlopen would crash on or misread: a file that is
not ELF, an artifact of another architecture, a .o, and a truncated copy (the
kernel maps a cut segment anyway, and the first touch of a page past the end
of the file kills the process with SIGBUS).
"""
import ctypes
import os
import platform
import struct

ABI_VERSION = 1
STATUS = {0: "KILN_OK", 1: "KILN_ERR_BATCH", 2: "KILN_ERR_ARG", 3: "KILN_ERR_THREADS",
          4: "KILN_ERR_CAPACITY", 5: "KILN_ERR_VALUE", 6: "KILN_ERR_DEVICE"}

RUN_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                          ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int64)
SET_THREADS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)


class TensorDesc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("dims", ctypes.POINTER(ctypes.c_int64)), ("batch_mask", ctypes.c_uint32)]


class Step(ctypes.Structure):
    # check: ABI 1.2 (0 before)
    _fields_ = [("fn", ctypes.c_void_p), ("name", ctypes.c_char_p), ("nodes", ctypes.c_char_p),
                ("n_args", ctypes.c_int32), ("first_arg", ctypes.c_int32),
                ("parallel", ctypes.c_int32), ("check", ctypes.c_int32),
                ("flops", ctypes.c_double)]


class Pipe(ctypes.Structure):
    # ABI 1.3: steps `first` and `first + 1` run as one row pipe
    _fields_ = [("first", ctypes.c_int32), ("batched", ctypes.c_int32), ("rows1", ctypes.c_int32),
                ("rows2", ctypes.c_int32), ("stride", ctypes.c_int32), ("pad", ctypes.c_int32),
                ("window", ctypes.c_int32), ("band", ctypes.c_int32)]


class Descriptor(ctypes.Structure):
    # Fields past set_threads exist from the minor version named beside them:
    # read them only then (an older artifact's descriptor ends before).
    _fields_ = [("abi_version", ctypes.c_uint32), ("abi_minor", ctypes.c_uint32),
                ("prefix", ctypes.c_char_p), ("kiln_version", ctypes.c_char_p),
                ("target", ctypes.c_char_p),
                ("n_inputs", ctypes.c_int32), ("n_outputs", ctypes.c_int32),
                ("inputs", ctypes.POINTER(TensorDesc)), ("outputs", ctypes.POINTER(TensorDesc)),
                ("workspace_size", ctypes.c_int64), ("workspace_align", ctypes.c_int64),
                ("max_batch", ctypes.c_int64),
                ("n_steps", ctypes.c_int32), ("n_consts", ctypes.c_int32),
                ("steps", ctypes.POINTER(Step)), ("args", ctypes.c_void_p),
                ("consts", ctypes.c_void_p),
                ("run", RUN_FN), ("set_threads", SET_THREADS_FN),
                ("run_profiled", ctypes.c_void_p),  # 1.1
                ("n_pipes", ctypes.c_int32), ("pipes", ctypes.POINTER(Pipe)),  # 1.3
                ("last_error", ctypes.CFUNCTYPE(ctypes.c_char_p)), ("gpu", ctypes.c_void_p)]  # 1.4


MACHINES = {62: "x86_64", 183: "aarch64", 40: "arm (32-bit)", 3: "i386"}
HOST_MACHINE = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183}.get(platform.machine().lower(), -1)


def check_elf(path, error):
    """Raises error(message) unless `path` is a 64-bit ELF shared object of
    this machine whose program headers, segments and section headers all lie
    inside the file. The same checks, and messages, as rt/loader.c."""
    def truncated(why):
        return error(f"'{path}' is truncated or not an ELF shared object: {why}")
    try:
        f = open(path, "rb")
    except OSError as e:
        raise error(f"cannot open artifact '{path}': {e.strerror}") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        h = f.read(64)
        n = len(h)
        if h[:4] != b"\x7fELF"[:min(n, 4)]:  # a prefix of the magic is a cut copy
            raise error(f"'{path}' is not a Kiln artifact (not an ELF shared library)")
        if n < 20:
            raise truncated(f"{n} bytes, shorter than an ELF header")
        order = "<" if h[5] == 1 else ">"
        elf_type, machine = struct.unpack_from(order + "HH", h, 16)
        if h[4] != 2 or machine != HOST_MACHINE:
            raise error(f"'{path}' is built for {MACHINES.get(machine, 'an unknown architecture')}"
                        f"{'' if h[4] == 2 else ' (32-bit)'}, but this machine is "
                        f"{MACHINES.get(HOST_MACHINE, 'this architecture')}: run it on the target")
        if elf_type == 1:
            raise error(f"'{path}' is a relocatable object (.o artifact): link it into your program; "
                        "only .so artifacts can be loaded")
        if elf_type != 3:
            raise error(f"'{path}' is not a shared library")
        if n < 64:
            raise truncated(f"{n} bytes, shorter than an ELF header")
        if order != "<" or struct.unpack_from("<H", h, 52)[0] != 64:
            raise truncated("its ELF header does not describe a 64-bit object of this machine")
        phoff, shoff = struct.unpack_from("<QQ", h, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", h, 54)
        if phentsize != 56 or phnum == 0 or phnum == 0xffff:
            raise truncated(f"{phnum} program headers of {phentsize} bytes")
        if phoff + phnum * 56 > size:
            raise truncated(f"its program headers end at byte {phoff + phnum * 56}, the file has {size}")
        f.seek(phoff)
        table = f.read(phnum * 56)
        for i in range(phnum):
            p_type, offset, filesz, memsz = struct.unpack_from("<I4xQ16xQQ", table, i * 56)
            if p_type == 1 and filesz > memsz:  # PT_LOAD
                raise truncated(f"segment {i} holds {filesz} file bytes in {memsz} bytes of memory")
            if offset + filesz > size:
                raise truncated(f"segment {i} ends at byte {offset + filesz}, the file has {size}")
        # not needed to load, but a copy that lost them lost its end
        if shoff and shoff + shnum * shentsize > size:
            raise truncated(f"its section headers end at byte {shoff + shnum * shentsize}, the file has {size}")
