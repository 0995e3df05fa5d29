# The scaling model of docs/scaling.md: buckets as src/dist/grad_sync.c cuts
# them, each ready when backward (time proportional to FLOPs) reaches its
# last layer, summed by a ring or tree all-reduce (NCCL's latency constants,
# measured bus bandwidths; docs/scaling.md names the sources), one after
# another; prints step time, exposed communication and efficiency per GPU
# count.  Run layers.py first:  /usr/bin/python3 bench/scaling/model.py
import json, math, os, sys
D = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "layers.json")))
MiB = 1024 * 1024
HBM = 2.8e12          # assumed achieved device-to-device copy bandwidth, B/s
def buckets(name, cap_bytes, elem=4):
    d = D[name]
    pcount = {n: p for n, p, m in d["exec"]}
    order = [n for n in d["order"] if pcount.get(n, 0) > 0]
    B = []
    for n in reversed(order):
        c = pcount[n]
        if not B or (B[-1]["count"] + c) * elem > cap_bytes:
            B.append({"count": 0, "layers": []})
        B[-1]["count"] += c
        B[-1]["layers"].append(n)
    return B
def ready_times(name, t_bwd):
    # backward visits layers in reverse execution order; time ~ backward FLOPs
    ex = D[name]["exec"]
    w = []
    for i, (n, p, m) in enumerate(ex):
        w.append(m * (1 if i == 0 else 2))   # first conv needs no input gradient
    tot = sum(w)
    t = 0.0
    ready = {}
    for (n, p, m), wi in reversed(list(zip(ex, w))):
        t += t_bwd * wi / tot
        ready[n] = t
    return ready
def comm(S, n, busbw_nvl=480e9, busbw_ib=376e9):
    """seconds for one all-reduce of S bytes on n GPUs, 8 per node; NCCL-style alpha"""
    N = max(1, n // 8)
    f = 2 * (n - 1) / n
    if N == 1:
        nvls = 23e-6 + f * S / busbw_nvl
        ring = (8.4 + 2 * (n - 1) * 3.4) * 1e-6 + f * S / 370e9
        return min(nvls, ring), ("nvls" if nvls <= ring else "ring")
    ring = 1.4 * (8.4 + (2 * (n - 1) - 2 * N) * 3.4 + 2 * N * 14.0) * 1e-6 + f * S / busbw_ib
    tree = 2 * (7 * 28 + math.log2(N) * 28) * 1e-6 + f * S / busbw_ib
    return min(ring, tree), ("ring" if ring <= tree else "tree")
def step(name, n, t1, cap=25 * MiB, elem=4, verbose=False):
    t_fwd, t_bwd = t1 / 3, 2 * t1 / 3
    S_all = D[name]["params"] * elem
    copy_in = D[name]["params"] * (4 + elem) / HBM  # read f32 grad, write bucket
    copy_out = copy_in
    r = ready_times(name, t_bwd + copy_in)
    Bk = buckets(name, cap, elem)
    end = 0.0
    total_comm = 0.0
    algs = set()
    rows = []
    for b in Bk:
        ready = max(r[l] for l in b["layers"])
        c, alg = comm(b["count"] * elem, n)
        algs.add(alg)
        start = max(ready, end)
        end = start + c
        total_comm += c
        rows.append((b["count"] * elem / 1e6, ready * 1e3, start * 1e3, end * 1e3))
    bwd_end = t_bwd + copy_in
    exposed = max(0.0, end - bwd_end)
    tn = t_fwd + bwd_end + exposed + copy_out
    if verbose:
        for row in rows: print("   bucket %7.1f MB ready %6.2f start %6.2f end %6.2f ms" % row)
    return dict(tn=tn, exposed=exposed, comm=total_comm, eff=t1 / tn, nb=len(Bk), algs=algs,
                copies=copy_in + copy_out, noover=t1 + total_comm + copy_in + copy_out)
cases = {"resnet50": 256 / 5000, "vgg16": 128 / 3000}
for name, t1 in cases.items():
    print(name, "T1 %.2f ms" % (t1 * 1e3), "grad MB %.1f" % (D[name]["params"] * 4 / 1e6))
    step(name, 8, t1, verbose=True)
    for n in [8, 16, 32, 128, 512, 1024]:
        s = step(name, n, t1)
        nb = step(name, n, t1, elem=2)
        print(" n=%5d nodes=%4d buckets=%d alg=%s comm %.2f ms exposed %.2f ms copies %.2f step %.2f eff %.3f | no-overlap eff %.3f | bf16-grads eff %.3f"
              % (n, n // 8, s["nb"], ",".join(sorted(s["algs"])), s["comm"] * 1e3, s["exposed"] * 1e3,
                 s["copies"] * 1e3, s["tn"] * 1e3, s["eff"], t1 / s["noover"], nb["eff"]))
    for t1x in [t1 / 1.5]:
        print(" faster compute T1 %.2f ms:" % (t1x * 1e3), " ".join("n=%d eff %.3f" % (n, step(name, n, t1x)["eff"]) for n in [8, 16, 32, 128, 512, 1024]))
# validation against the user report: 512 MB all-reduce on 1984 GPUs
for n, S in [(1984, 512 * MiB)]:
    c, alg = comm(S, n)
    print("validate n=%d S=%d MiB: %.2f ms (%s) busbw %.0f GB/s" % (n, S // MiB, c * 1e3, alg, 2 * (n - 1) / n * S / c / 1e9))
for n in [8, 16, 32, 128, 512, 1024]:
    c, alg = comm(25 * MiB, n)
    N = max(1, n // 8)
    ring = 1.4 * (8.4 + (2 * (n - 1) - 2 * N) * 3.4 + 2 * N * 14.0) if N > 1 else 8.4 + 2 * (n - 1) * 3.4
    tree = 2 * (7 * 28 + math.log2(N) * 28) if N > 1 else float('nan')
    print("25MiB n=%d: %.3f ms %s; ring alpha %.0f us tree alpha %.0f us; bw term %.3f ms" % (n, c * 1e3, alg, ring, tree, 2*(n-1)/n*25*MiB/(376e9 if N>1 else 480e9)*1e3))
