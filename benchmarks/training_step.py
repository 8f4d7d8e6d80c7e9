"""Time of one forward pass and of one forward + backward pass of the trainable transformer.

Usage: python benchmarks/training_step.py [--batch 64] [--n 128] [--d 2] [--layers 16] [--repeat 5]

For each parametrization (scalar, matrix) prints the median wall time of ``repeat`` forward passes
(:meth:`attneb.numerics.training.TrainedTransformer.denoise`) and of ``repeat`` forward + backward passes
(:func:`attneb.numerics.training.loss_and_gradient`), and their ratio; the goal is a ratio <= 4.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from attneb.numerics.training import PARAMETRIZATIONS, TrainedTransformer, init_params, loss_and_gradient


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--d", type=int, default=2)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    clean = rng.standard_normal((args.batch, args.n, args.d))
    noisy = clean + np.sqrt(0.5) * rng.standard_normal(clean.shape)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; numpy {np.__version__}")
    print(f"B = {args.batch} contexts x n = {args.n} tokens x d = {args.d}, L = {args.layers} layers, "
          f"median of {args.repeat}")
    for kind in PARAMETRIZATIONS:
        params = init_params(args.d, args.layers, 0.5, parametrization=kind, rng=rng)
        net = TrainedTransformer(params)
        forward = median_time(lambda: net.denoise(noisy), args.repeat)
        both = median_time(lambda: loss_and_gradient(params, noisy, clean), args.repeat)
        print(f"{kind:>6}: forward {forward * 1e3:8.1f} ms   forward+backward {both * 1e3:8.1f} ms   "
              f"ratio {both / forward:.2f}")


if __name__ == "__main__":
    main()
