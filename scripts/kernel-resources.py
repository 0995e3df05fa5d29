#!/usr/bin/env python3
"""The per-kernel report of scripts/kernel-resources.sh, from files it made.

For each SOURCE.cu, OUT holds SOURCE.cubin (sm_90), SOURCE.ptxas.txt
(ptxas --resource-usage) and SOURCE.ptx.  Per kernel this reads:
  registers, spills, stack, barriers, static shared  ptxas's report
  constant bytes      the kernel's .nv.constantN.<kernel> sections of the cubin
  instruction counts  the SASS (cuobjdump -sass), else the PTX, by class:
      LDG/STG (global), LDS/STS (shared), LD/ST (generic), each by width in
      bits ("LDG.128" is SASS's LDG.E.128, "LDG.32" its plain LDG.E); LDL/STL
      (local memory: spills and stack arrays); LDGSTS (cp.async), LDSM
      (ldmatrix); HMMA, HGMMA and IMMA (tensor cores); FFMA (fp32 FMA).
      Those inside a loop (between a backward branch and its target) are
      counted again under "in_loops".
  occupancy           active warps / 64 on one H100 SM for each block size,
                      by the rules of CUDA's cuda_occupancy.h (occupancy()).
Also `kernel-resources.py occupancy REGISTERS BLOCK [SHARED]` prints one.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

# One H100 (sm_90) SM, as cuda_occupancy.h models it.
SM90_REGISTERS_PER_SM = 65536
SM90_REGISTERS_PER_BLOCK = 65536
SM90_REGISTER_GRANULE = 256        # registers are allocated per warp, in these units
SM90_SUB_PARTITIONS = 4            # each holds a quarter of the register file
SM90_MAX_REGISTERS_PER_THREAD = 255
SM90_MAX_WARPS_PER_SM = 64
SM90_MAX_BLOCKS_PER_SM = 32
SM90_MAX_THREADS_PER_BLOCK = 1024
SM90_SHARED_PER_SM = 228 * 1024    # the largest carveout, which the default picks when needed
SM90_SHARED_PER_BLOCK = 48 * 1024  # without opting in (static shared cannot opt in)
SM90_SHARED_RESERVED_PER_BLOCK = 1024
SM90_SHARED_GRANULE = 128
WARP = 32


def round_up(x, granule):
    return (x + granule - 1) // granule * granule


def occupancy(registers, block, shared=0):
    """Resident blocks and warps of one SM for a kernel of `registers` per
    thread and `shared` bytes of shared memory per block, launched in blocks
    of `block` threads; the limit that binds is named."""
    warps_per_block = (block + WARP - 1) // WARP
    limits = {"blocks": SM90_MAX_BLOCKS_PER_SM,
              "warps": SM90_MAX_WARPS_PER_SM // warps_per_block}
    if block > SM90_MAX_THREADS_PER_BLOCK:
        limits["warps"] = 0
    regs_per_warp = round_up(registers * WARP, SM90_REGISTER_GRANULE)
    # The hardware checks a block's registers as if its warps were spread
    # over all four sub-partitions; warps then fit per sub-partition.
    regs_assumed = regs_per_warp * round_up(warps_per_block, SM90_SUB_PARTITIONS)
    if registers > SM90_MAX_REGISTERS_PER_THREAD or regs_assumed > SM90_REGISTERS_PER_BLOCK:
        limits["registers"] = 0
    elif regs_per_warp > 0:
        per_sub = SM90_REGISTERS_PER_SM // SM90_SUB_PARTITIONS // regs_per_warp
        limits["registers"] = per_sub * SM90_SUB_PARTITIONS // warps_per_block
    shared_per_block = round_up(shared + SM90_SHARED_RESERVED_PER_BLOCK, SM90_SHARED_GRANULE)
    if shared > SM90_SHARED_PER_BLOCK:
        limits["shared"] = 0
    elif shared_per_block > 0:
        limits["shared"] = SM90_SHARED_PER_SM // shared_per_block
    binding = min(limits, key=lambda k: (limits[k], ["warps", "registers", "shared", "blocks"].index(k)))
    blocks = limits[binding]
    warps = blocks * warps_per_block
    return {"blocks_per_sm": blocks, "warps_per_sm": warps,
            "occupancy": warps / SM90_MAX_WARPS_PER_SM, "limited_by": binding}


def parse_ptxas(text):
    """ptxas --resource-usage (-v) output: {mangled name: resources}."""
    kernels, entry, props_of = {}, None, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            entry = m.group(1)
            kernels[entry] = {"registers": 0, "spill_store_bytes": 0, "spill_load_bytes": 0,
                              "stack_bytes": 0, "static_shared_bytes": 0, "barriers": 0}
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            props_of = m.group(1)
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and props_of in kernels:
            k = kernels[props_of]
            k["stack_bytes"], k["spill_store_bytes"], k["spill_load_bytes"] = map(int, m.groups())
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and entry:
            k = kernels[entry]
            k["registers"] = int(m.group(1))
            b = re.search(r"used (\d+) barriers", line)
            s = re.search(r"(\d+) bytes smem", line)
            k["barriers"] = int(b.group(1)) if b else 0
            k["static_shared_bytes"] = int(s.group(1)) if s else 0
    return kernels


def elf_sections(path):
    """{section name: size} of an ELF64 little-endian file (a cubin)."""
    with open(path, "rb") as f:
        data = f.read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    sections = {}
    for h in headers:
        start = names_at + h[0]
        name = data[start:data.index(b"\0", start)].decode()
        sections[name] = h[5]
    return sections


def constant_bytes(sections, mangled):
    return sum(size for name, size in sections.items()
               if re.fullmatch(r"\.nv\.constant\d+\." + re.escape(mangled), name))


def run_cuobjdump(cuobjdump, cubin):
    """The SASS listing, or None when there is no cuobjdump that reads the
    cubin.  CUDA 12.8 and later write the cubin's ELF header in a new form
    (ABI version 8, the SM number in e_flags bits 8..15); an older cuobjdump
    (Debian's 11.8) still disassembles sm_90 code once the header is put
    back in the old form (ABI 7: e_flags sm | 0x500 | sm << 16) in a copy."""
    if not cuobjdump:
        return None

    def dump(path):
        r = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True)
        return r.stdout if r.returncode == 0 and "Function :" in r.stdout else None

    listing = dump(cubin)
    if listing is not None:
        return listing
    data = bytearray(open(cubin, "rb").read())
    if data[8] != 8:
        return None
    flags, = struct.unpack_from("<I", data, 0x30)
    sm = (flags >> 8) & 0xFF
    data[8] = 7
    struct.pack_into("<I", data, 0x30, sm | 0x500 | sm << 16)
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "abi7.cubin")
        with open(copy, "wb") as f:
            f.write(data)
        return dump(copy)


def width_class(prefix, bits):
    return "%s.%d" % (prefix, bits if bits in (8, 16, 32, 64, 128) else 32)


def classify_sass(opcode):
    parts = opcode.split(".")
    op, mods = parts[0], set(parts[1:])
    if op in ("LDG", "STG", "LDS", "STS", "LD", "ST"):
        if "128" in mods:
            bits = 128
        elif "64" in mods:
            bits = 64
        elif mods & {"U8", "S8"}:
            bits = 8
        elif mods & {"U16", "S16"}:
            bits = 16
        else:
            bits = 32
        return width_class(op, bits)
    if op in ("LDL", "STL", "LDGSTS", "LDSM", "HMMA", "HGMMA", "IMMA", "FFMA"):
        return op
    return None


def parse_sass(listing):
    """{mangled: [(address, class or None, branch target or None)]}."""
    kernels, current = {}, None
    for line in listing.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            current = kernels.setdefault(m.group(1), [])
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)(.*)", line)
        if m and current is not None:
            address = int(m.group(1), 16)
            target = None
            if m.group(2).startswith("BRA"):
                t = re.search(r"0x([0-9a-f]+)", m.group(3).split(";")[0])
                target = int(t.group(1), 16) if t else None
            current.append((address, classify_sass(m.group(2)), target))
    return kernels


def classify_ptx(opcode):
    parts = opcode.split(".")
    op = parts[0]
    if op in ("ld", "st"):
        if "param" in parts or "const" in parts:
            return None
        space = {"global": "G", "shared": "S", "local": "L"}
        kind = next((space[p.split("::")[0]] for p in parts if p.split("::")[0] in space), "")
        base = ("LD" if op == "ld" else "ST") + kind
        if kind == "L":
            return base
        vec = 4 if "v4" in parts else 2 if "v2" in parts else 8 if "v8" in parts else 1
        bits = re.search(r"(\d+)$", parts[-1])
        return width_class(base, vec * int(bits.group(1)) if bits else 32)
    if op == "fma" and parts[-1] == "f32":
        return "FFMA"
    if op in ("mma", "wmma") and "mma" in parts + [op]:
        return "IMMA" if any(re.fullmatch(r"[su](4|8)|b1", p) for p in parts) else "HMMA"
    if op == "wgmma" and len(parts) > 1 and parts[1].startswith("mma_async"):
        return "HGMMA"
    if op == "cp" and len(parts) > 1 and parts[1] == "async" and "bulk" not in parts:
        return "LDGSTS"
    if op == "ldmatrix":
        return "LDSM"
    return None


def parse_ptx(text):
    """The same shape as parse_sass, with line numbers for addresses."""
    kernels, current, labels, pending = {}, None, {}, []
    for number, line in enumerate(text.splitlines()):
        m = re.match(r"\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+(\S+?)\s*\(?$", line)
        if m:
            current, labels, pending = kernels.setdefault(m.group(1), []), {}, []
            continue
        if current is None:
            continue
        m = re.match(r"(\$\w+):", line)
        if m:
            labels[m.group(1)] = number
            continue
        m = re.match(r"\s+(?:@!?%\w+\s+)?([a-z][a-z0-9_.:]*)\s*([^;]*);", line)
        if m:
            target = None
            if m.group(1).startswith("bra"):
                label = m.group(2).strip()
                target = labels.get(label, number + 1)  # a label not seen yet is ahead
            current.append((number, classify_ptx(m.group(1)), target))
    return kernels


def count(instructions):
    """Totals by class, and again for those inside loops."""
    loops = [(target, address) for address, _, target in instructions
             if target is not None and target < address]
    totals, in_loops = {}, {}
    for address, cls, _ in instructions:
        if cls is None:
            continue
        totals[cls] = totals.get(cls, 0) + 1
        if any(lo <= address <= hi for lo, hi in loops):
            in_loops[cls] = in_loops.get(cls, 0) + 1
    return dict(sorted(totals.items())), dict(sorted(in_loops.items()))


def demangle(names):
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    r = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True)
    out = r.stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def short_name(demangled):
    """`void f<T>(T)` -> `f<T>`: the name without return type and parameters."""
    depth = 0
    for i, c in enumerate(demangled):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0:
            demangled = demangled[:i]
            break
    return re.sub(r"^void ", "", demangled).replace("(anonymous namespace)::", "")


def report(sources, out, cuobjdump, blocks):
    rows = []
    for source in sources:
        stem = os.path.splitext(os.path.basename(source))[0]
        cubin = os.path.join(out, stem + ".cubin")
        with open(os.path.join(out, stem + ".ptxas.txt")) as f:
            resources = parse_ptxas(f.read())
        sections = elf_sections(cubin)
        listing = run_cuobjdump(cuobjdump, cubin)
        if listing is not None:
            origin, code = "sass", parse_sass(listing)
            with open(os.path.join(out, stem + ".sass"), "w") as f:
                f.write(listing)
        else:
            with open(os.path.join(out, stem + ".ptx")) as f:
                origin, code = "ptx", parse_ptx(f.read())
        names = demangle(sorted(resources))
        for mangled in sorted(resources, key=lambda n: short_name(names[n])):
            row = {"kernel": mangled, "demangled": names[mangled],
                   "name": short_name(names[mangled]), "file": source}
            row.update(resources[mangled])
            row["constant_bytes"] = constant_bytes(sections, mangled)
            row["instructions_from"] = origin
            row["counts"], row["in_loops"] = count(code.get(mangled, []))
            row["occupancy"] = {str(b): occupancy(row["registers"], b, row["static_shared_bytes"])
                                for b in blocks}
            rows.append(row)
    return rows


def percent(fraction):
    return ("%.1f" % (100 * fraction)).rstrip("0").rstrip(".") + "%"


def table(rows, blocks):
    head = ["kernel", "file", "regs", "spill st/ld", "stack", "smem", "LDG 128/64/32",
            "loop LDG 128/32", "STG 128/32", "FFMA", "MMA"] + ["occ@%d" % b for b in blocks]
    lines = [head]
    for r in rows:
        c, loop = r["counts"], r["in_loops"]
        mma = c.get("HMMA", 0) + c.get("HGMMA", 0) + c.get("IMMA", 0)
        lines.append([r["name"], os.path.basename(r["file"]), str(r["registers"]),
                      "%d/%d" % (r["spill_store_bytes"], r["spill_load_bytes"]),
                      str(r["stack_bytes"]), str(r["static_shared_bytes"]),
                      "%d/%d/%d" % (c.get("LDG.128", 0), c.get("LDG.64", 0), c.get("LDG.32", 0)),
                      "%d/%d" % (loop.get("LDG.128", 0), loop.get("LDG.32", 0)),
                      "%d/%d" % (c.get("STG.128", 0), c.get("STG.32", 0)),
                      str(c.get("FFMA", 0)), str(mma)] +
                     [percent(r["occupancy"][str(b)]["occupancy"]) for b in blocks])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    text = []
    for n, line in enumerate(lines):
        text.append("  ".join(cell.ljust(w) if i < 2 else cell.rjust(w)
                              for i, (cell, w) in enumerate(zip(line, widths))).rstrip())
        if n == 0:
            text.append("  ".join("-" * w for w in widths))
    return "\n".join(text)


def main(argv):
    if argv[:1] == ["occupancy"]:
        if len(argv) not in (3, 4):
            print("usage: kernel-resources.py occupancy REGISTERS BLOCK [SHARED_BYTES]", file=sys.stderr)
            return 2
        o = occupancy(*map(int, argv[1:]))
        print("%.1f%% %d blocks %d warps limited by %s" % (
            100 * o["occupancy"], o["blocks_per_sm"], o["warps_per_sm"], o["limited_by"]))
        return 0
    args = {"--out": None, "--json": None, "--cuobjdump": "", "--blocks": "128 256"}
    sources = []
    i = 0
    while i < len(argv):
        if argv[i] in args and i + 1 < len(argv):
            args[argv[i]] = argv[i + 1]
            i += 2
        else:
            sources.append(argv[i])
            i += 1
    if not args["--out"] or not args["--json"] or not sources:
        print("usage: kernel-resources.py --out DIR --json FILE [--cuobjdump PATH] "
              "[--blocks \"128 256\"] SOURCE.cu ...", file=sys.stderr)
        return 2
    blocks = [int(b) for b in args["--blocks"].split()]
    rows = report(sources, args["--out"], args["--cuobjdump"], blocks)
    with open(args["--json"], "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")
    origins = sorted({r["instructions_from"] for r in rows})
    print(table(rows, blocks))
    print("\n%d kernels, sm_90; instruction counts from the %s%s; occupancy for an H100 SM; "
          "JSON in %s" % (len(rows), " and ".join(s.upper() for s in origins),
                          "" if origins == ["sass"] else " (no cuobjdump read the cubin: "
                          "PTX stands in, see docs/kernel-resources.md)", args["--json"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
