#!/usr/bin/env python3
"""PyTorch torch.distributed (NCCL backend) reference for gpuscout's collectives benchmark (issue #4).

Times all_reduce, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single, broadcast and
send/recv (batch_isend_irecv to the next rank while receiving from the previous one, as nccl-tests'
sendrecv_perf) over a size sweep, in nccl-tests' conventions (../shared/reference/
measurement-methodology.md, section 1):

  size S     what nccl-tests prints in its size column: all_reduce, broadcast, sendrecv: the buffer
             each rank holds (count x type); all_gather: the total output (ranks x per-rank send);
             reduce_scatter: the total input (ranks x per-rank output); alltoall: the per-rank send
             buffer (ranks x per-peer count x type). Counts are rounded down as nccl-tests does, and
             the size is recomputed from the count; a size whose count rounds to 0 is skipped.
  algbw      S / time, GB/s = 1e9 B/s
  busbw      algbw x 2(n-1)/n (all_reduce), x (n-1)/n (all_gather, reduce_scatter, alltoall),
             x 1 (broadcast, sendrecv)
  timing     float32, sum, out-of-place where torch.distributed has that form (all_gather,
             reduce_scatter, alltoall, sendrecv); all_reduce and broadcast exist only in place there,
             so they run in place (the rows say in_place; NCCL moves the same bytes either way);
             --warmup untimed ops (default 5), ranks aligned by a barrier, then CUDA events on the
             current stream around --iters back-to-back ops (default 20): time = elapsed / iters,
             averaged over the ranks (nccl-tests' -a 1). --samples > 1 repeats that and reports the
             mean of the samples (and their min/max).
  check      after the timed ops, inputs are refilled with small integers, one more op runs and every
             output element is compared with its exact expected value (nccl-tests' #wrong column).

Launch, either way (one process per GPU; every rank must see its own GPU):
  torchrun --nproc_per_node 2 bench/collectives_reference_torch.py --out torch.json
  python3 bench/collectives_reference_torch.py --nproc 2 --out torch.json     # spawns the ranks itself
Options: --ops all_reduce,all_gather,... --min-bytes 8 --max-bytes 8G [--factor 2] | --sizes 8,1G,8G,
--warmup 5 --iters 20 --samples 1 --no-check. Rank 0 prints a table like nccl-tests' and writes JSON.
Exit status: 0 all sizes ran with no wrong values; 1 wrong values; 2 usage.
"""
import argparse
import datetime
import json
import os
import socket
import sys

OPS = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "sendrecv"]
ALIASES = {
    "allreduce": "all_reduce", "all_gather_into_tensor": "all_gather", "allgather": "all_gather",
    "reduce_scatter_tensor": "reduce_scatter", "reducescatter": "reduce_scatter",
    "all_to_all_single": "alltoall", "all_to_all": "alltoall", "send_recv": "sendrecv",
    "send/recv": "sendrecv",
}
SIZE_MEANING = {
    "all_reduce": "count x type size (the buffer each rank holds)",
    "all_gather": "total output = ranks x per-rank send",
    "reduce_scatter": "total input = ranks x per-rank output",
    "alltoall": "per-rank send buffer = ranks x per-peer count x type size",
    "broadcast": "count x type size",
    "sendrecv": "count x type size",
}


def parse_bytes(text):
    """'8', '1K', '64KiB', '1G', '8GiB' -> bytes (K/M/G are powers of 1024, as nccl-tests' -b/-e)."""
    t = text.strip().upper().replace("IB", "").replace("B", "")
    mult = 1
    if t and t[-1] in "KMGT":
        mult = 1024 ** ("KMGT".index(t[-1]) + 1)
        t = t[:-1]
    try:
        value = float(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (examples: 8, 64K, 1M, 8G)")
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"not a whole positive number of bytes: {text!r}")
    return int(value)


def format_bytes(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n}B"


def busbw_factor(op, n):
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0


def element_counts(op, size, n, elem):
    """(count, bytes) as nccl-tests computes them: the per-rank or per-peer count rounded down, and
    the size it stands for. count is the element count of the op's input tensor."""
    if op in ("all_gather", "reduce_scatter", "alltoall"):
        per = size // (elem * n)  # per-rank send (all_gather), output (reduce_scatter), per-peer (alltoall)
        return per, per * n * elem
    count = size // elem
    return count, count * elem


def sweep(args):
    if args.sizes:
        return sorted(set(args.sizes))
    sizes, s = [], args.min_bytes
    while s <= args.max_bytes:
        sizes.append(s)
        s *= args.factor
    return sizes


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", default=",".join(OPS),
                   help="comma-separated: " + ",".join(OPS) + " (torch names accepted too)")
    p.add_argument("--min-bytes", type=parse_bytes, default=8, help="smallest size (default 8)")
    p.add_argument("--max-bytes", type=parse_bytes, default=8 << 30, help="largest size (default 8G)")
    p.add_argument("--factor", type=int, default=2, help="size step factor (default 2)")
    p.add_argument("--sizes", type=lambda s: [parse_bytes(x) for x in s.split(",") if x],
                   help="explicit sizes instead of the sweep, e.g. 8,1G,8G")
    p.add_argument("--warmup", type=int, default=5, help="untimed ops per size (default 5)")
    p.add_argument("--iters", type=int, default=20, help="timed back-to-back ops per sample (default 20)")
    p.add_argument("--samples", type=int, default=1, help="samples per size (default 1, nccl-tests)")
    p.add_argument("--no-check", action="store_true", help="skip the wrong-value check")
    p.add_argument("--nproc", type=int, default=0,
                   help="without torchrun: spawn this many ranks (default: every visible GPU)")
    p.add_argument("--out", help="write the JSON here (rank 0); '-' for stdout")
    args = p.parse_args(argv)
    ops = []
    for name in (x.strip().lower() for x in args.ops.split(",") if x.strip()):
        name = ALIASES.get(name, name)
        if name not in OPS:
            p.error(f"--ops: unknown collective {name!r}; known: {', '.join(OPS)}")
        if name not in ops:
            ops.append(name)
    args.ops = ops
    if args.factor < 2:
        p.error("--factor must be at least 2")
    if args.min_bytes > args.max_bytes:
        p.error(f"--min-bytes {args.min_bytes} is larger than --max-bytes {args.max_bytes}")
    for flag in ("warmup", "iters", "samples"):
        if getattr(args, flag) < (0 if flag == "warmup" else 1):
            p.error(f"--{flag} must be {'>= 0' if flag == 'warmup' else '>= 1'}")
    return args


class Case:
    """Buffers and one launch of a collective at one size on this rank."""

    def __init__(self, torch, dist, op, count, rank, n, device):
        self.torch, self.dist, self.op, self.rank, self.n = torch, dist, op, rank, n
        f32 = dict(dtype=torch.float32, device=device)
        if op in ("all_reduce", "broadcast"):  # in place: torch.distributed has no other form
            self.inp = self.out = torch.empty(count, **f32)
        elif op == "all_gather":
            self.inp, self.out = torch.empty(count, **f32), torch.empty(count * n, **f32)
        elif op == "reduce_scatter":
            self.inp, self.out = torch.empty(count * n, **f32), torch.empty(count, **f32)
        elif op == "alltoall":
            self.inp, self.out = torch.empty(count * n, **f32), torch.empty(count * n, **f32)
        elif op == "sendrecv":
            self.inp, self.out = torch.empty(count, **f32), torch.empty(count, **f32)
        # Zeros while timing: repeated in-place sums stay finite.
        self.inp.zero_()
        self.out.zero_()

    def fill(self):
        """Small integers whose results are exact in float32."""
        t, r, n = self.torch, self.rank, self.n
        if self.op == "alltoall":  # the chunk for peer j holds r * n + j
            self.inp.copy_(t.arange(n, dtype=t.float32, device=self.inp.device)
                           .repeat_interleave(self.inp.numel() // n) + r * n)
        elif self.op == "broadcast":
            self.inp.fill_(7.0 if r == 0 else 0.0)
        else:
            self.inp.fill_(float(r + 1))
        if self.out is not self.inp:
            self.out.fill_(-1.0)  # poisoned: an element the op does not write is counted wrong

    def launch(self):
        d, op = self.dist, self.op
        if op == "all_reduce":
            d.all_reduce(self.inp, op=d.ReduceOp.SUM)
        elif op == "all_gather":
            d.all_gather_into_tensor(self.out, self.inp)
        elif op == "reduce_scatter":
            d.reduce_scatter_tensor(self.out, self.inp, op=d.ReduceOp.SUM)
        elif op == "alltoall":
            d.all_to_all_single(self.out, self.inp)
        elif op == "broadcast":
            d.broadcast(self.inp, src=0)
        elif op == "sendrecv":
            nxt, prv = (self.rank + 1) % self.n, (self.rank - 1 + self.n) % self.n
            works = d.batch_isend_irecv([d.P2POp(d.isend, self.inp, nxt), d.P2POp(d.irecv, self.out, prv)])
            for w in works:
                w.wait()

    def check(self):
        """Refill, one more op, count output elements that differ from the exact expected value."""
        t, r, n = self.torch, self.rank, self.n
        self.fill()
        self.launch()
        t.cuda.synchronize()
        total = float(n * (n + 1) // 2)
        if self.op == "all_reduce" or self.op == "reduce_scatter":
            expected = t.full_like(self.out, total)
        elif self.op == "all_gather":
            expected = t.arange(1, n + 1, dtype=t.float32, device=self.out.device).repeat_interleave(
                self.out.numel() // n)
        elif self.op == "alltoall":  # the chunk from peer i holds i * n + r
            expected = (t.arange(n, dtype=t.float32, device=self.out.device) * n + r).repeat_interleave(
                self.out.numel() // n)
        elif self.op == "broadcast":
            expected = t.full_like(self.out, 7.0)
        else:  # sendrecv: from the previous rank
            expected = t.full_like(self.out, float((r - 1 + n) % n + 1))
        return int((self.out != expected).sum().item())


def run_rank(args, rank, world, local_rank):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    try:  # device_id (torch >= 2.3) binds the communicator to this GPU up front
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    except TypeError:
        dist.init_process_group("nccl", rank=rank, world_size=world)
    n = world
    elem = 4  # float32

    def barrier():
        dist.barrier(device_ids=[local_rank])

    results = []
    wrong_total = 0
    for op in args.ops:
        for size in sweep(args):
            count, nbytes = element_counts(op, size, n, elem)
            if count == 0:
                if rank == 0:
                    print(f"# {op}: {size} B holds no whole element per rank/peer at {n} ranks; skipped",
                          flush=True)
                continue
            case = Case(torch, dist, op, count, rank, n, device)
            for _ in range(args.warmup):
                case.launch()
            torch.cuda.synchronize()
            samples = []
            for _ in range(args.samples):
                barrier()
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(args.iters):
                    case.launch()
                end.record()
                end.synchronize()
                mine = start.elapsed_time(end) * 1e3 / args.iters  # us per op on this rank
                t = torch.tensor([mine], dtype=torch.float64, device=device)
                dist.all_reduce(t, op=dist.ReduceOp.SUM)
                samples.append(t.item() / n)  # mean over ranks (nccl-tests -a 1)
            wrong = -1
            if not args.no_check:
                w = torch.tensor([case.check()], dtype=torch.int64, device=device)
                dist.all_reduce(w, op=dist.ReduceOp.SUM)
                wrong = int(w.item())
                wrong_total += wrong
            time_us = sum(samples) / len(samples)
            algbw = nbytes / (time_us * 1e-6) / 1e9
            factor = busbw_factor(op, n)
            row = {
                "op": op,
                "torch_call": {
                    "all_reduce": "torch.distributed.all_reduce",
                    "all_gather": "torch.distributed.all_gather_into_tensor",
                    "reduce_scatter": "torch.distributed.reduce_scatter_tensor",
                    "alltoall": "torch.distributed.all_to_all_single",
                    "broadcast": "torch.distributed.broadcast",
                    "sendrecv": "torch.distributed.batch_isend_irecv (isend to rank+1, irecv from rank-1)",
                }[op],
                "dtype": "float",
                "redop": "sum" if op in ("all_reduce", "reduce_scatter") else "none",
                "root": 0 if op == "broadcast" else -1,
                "in_place": op in ("all_reduce", "broadcast"),
                "bytes": nbytes,
                "size": format_bytes(nbytes),
                "count": count,
                "size_meaning": SIZE_MEANING[op],
                "ranks": n,
                "time_us": time_us,
                "algbw_gbs": algbw,
                "busbw_gbs": algbw * factor,
                "busbw_factor": factor,
                "wrong": wrong,
            }
            if len(samples) > 1:
                row["time_us_samples"] = {"n": len(samples), "min": min(samples), "max": max(samples)}
            results.append(row)
            if rank == 0:
                print(f"{op:>14} {nbytes:>12} {count:>11}  {time_us:10.2f} {algbw:8.2f} {algbw * factor:8.2f}"
                      f" {wrong if wrong >= 0 else 'n/a':>6}", flush=True)
            del case
            torch.cuda.empty_cache()

    info = {
        "host": socket.gethostname(),
        "device": torch.cuda.get_device_name(device),
        "pci_bus_id": getattr(torch.cuda.get_device_properties(device), "pci_bus_id", None),
        "local_rank": local_rank,
    }
    ranks = [None] * n
    dist.all_gather_object(ranks, info)
    if rank == 0:
        nccl = torch.cuda.nccl.version()
        out = {
            "tool": "bench/collectives_reference_torch.py",
            "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command_line": sys.argv,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "nccl": ".".join(str(x) for x in nccl) if isinstance(nccl, tuple) else str(nccl),
            "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
            "world_size": n,
            "ranks": [dict(rank=i, **r) for i, r in enumerate(ranks)],
            "method": {
                "dtype": "float32",
                "warmup": args.warmup,
                "iters": args.iters,
                "samples": args.samples,
                "timing": (f"{args.warmup} untimed ops, barrier, then CUDA events on the current stream around "
                           f"{args.iters} back-to-back ops; time = elapsed / {args.iters}, mean over ranks"
                           + (f", mean of {args.samples} samples" if args.samples > 1 else "")),
                "sizes": "nccl-tests size semantics (size_meaning per row); GB/s = 1e9 B/s",
                "in_place": "all_reduce and broadcast (root 0) run in place: torch.distributed has no "
                            "out-of-place form of them; the other ops run out of place",
                "check": "wrong = output elements differing from the exact expected value after one more op "
                         "on small-integer inputs, summed over ranks; -1 when --no-check",
            },
            "results": results,
            "wrong_total": wrong_total,
        }
        text = json.dumps(out, indent=1)
        if args.out == "-":
            print(text)
        elif args.out:
            tmp = args.out + ".tmp"
            with open(tmp, "w") as f:
                f.write(text + "\n")
            os.replace(tmp, args.out)
            print(f"# wrote {args.out}", flush=True)
    barrier()
    dist.destroy_process_group()
    return wrong_total


def spawned(local_rank, args, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    wrong = run_rank(args, local_rank, world, local_rank)
    if wrong:
        sys.exit(1)


def main(argv):
    args = parse_args(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        if rank == 0:
            print(f"# {world} ranks (torchrun); {'op':>14} {'size':>12} {'count':>11}  {'time_us':>10} "
                  f"{'algbw':>8} {'busbw':>8} {'#wrong':>6}", flush=True)
        return 1 if run_rank(args, rank, world, local_rank) else 0
    import torch
    import torch.multiprocessing as mp

    world = args.nproc or torch.cuda.device_count()
    if world < 1 or world > torch.cuda.device_count():
        print(f"collectives_reference_torch: --nproc {world}: {torch.cuda.device_count()} GPU(s) visible",
              file=sys.stderr)
        return 2
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    print(f"# {world} ranks (spawned); {'op':>14} {'size':>12} {'count':>11}  {'time_us':>10} "
          f"{'algbw':>8} {'busbw':>8} {'#wrong':>6}", flush=True)
    try:
        mp.spawn(spawned, args=(args, world, port), nprocs=world, join=True)
    except mp.ProcessExitedException as e:
        print(f"collectives_reference_torch: a rank failed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
