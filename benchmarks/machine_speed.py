"""What this machine is and how fast it multiplies, printed at the start of
`make test` so that a slow host is visible in the log: the CPU model, its
cores, the flags that decide bf16 and int8 (`bert_tf.precision`), and the
fp32 matmul rate (the best of 5 XLA-compiled chains of ten 1024 x 1024
matmuls; the project's 2-core machines read about 150 to 240 GFLOP/s).

    .venv/bin/python benchmarks/machine_speed.py
"""

import os
import platform
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

from bert_tf.precision import cpu_bf16_flags, cpu_int8_flags  # noqa: E402


def cpu_model(cpuinfo="/proc/cpuinfo"):
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            return next((line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name")),
                        platform.processor() or platform.machine())
    except OSError:
        return platform.processor() or platform.machine()


def matmul_gflops(n=1024, chain=10, repeats=5):
    @tf.function(jit_compile=True)
    def chained(a, b):
        for _ in range(chain):
            a = tf.matmul(a, b) * 0.5
        return a

    a = tf.random.normal([n, n])
    b = tf.random.normal([n, n]) / n ** 0.5
    chained(a, b).numpy()  # compiled once, outside the timing
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        chained(a, b).numpy()
        best = min(best, time.perf_counter() - start)
    return chain * 2 * n ** 3 / best / 1e9


def main():
    flags = cpu_bf16_flags() + cpu_int8_flags()
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, "
          f"{', '.join(flags) or 'no bf16/int8 flags'}; fp32 matmul "
          f"{matmul_gflops():.0f} GFLOP/s; {time.strftime('%Y-%m-%d %H:%M')}",
          flush=True)


if __name__ == "__main__":
    main()
