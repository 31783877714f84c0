#!/usr/bin/env python3
"""soak-table.py CSV: the Markdown table of a soak record (TestSoak's
BALDE_SOAK_CSV) for docs/RELIABILITY.md: per metric the first sample, the
warm sample the test's flatness check compares with (index len/4, at least
18 with 10 s samples), the last, min, max and a trend line (one character
per minute, min ▁ … █ max), then the totals."""
import csv
import sys

BARS = "▁▂▃▄▅▆▇█"
rows = list(csv.DictReader(open(sys.argv[1])))
# The sample taken when the run ends repeats the last period with no
# requests; the flatness check uses it (it is the last sample), the trend
# and the latency columns do not.
n = len(rows)
warm = max(n // 4, 18) if n >= 19 else n // 4
metrics = [
    ("live heap after GC (MiB)", "live_mib"),
    ("heap in use (MiB)", "heap_mib"),
    ("goroutines", "goroutines"),
    ("open files", "open_fds"),
    ("WAL (KiB)", "wal_kib"),
    ("web decision p50 (ms)", "p50_ms"),
    ("web decision p99 (ms)", "p99_ms"),
    ("web requests per 10 s", "requests"),
]
per_min = 6  # 10 s samples


def trend(vals):
    lo, hi = min(vals), max(vals)
    out = []
    for i in range(0, len(vals), per_min):
        chunk = vals[i:i + per_min]
        v = sum(chunk) / len(chunk)
        out.append(BARS[0] if hi == lo else BARS[round((v - lo) / (hi - lo) * 7)])
    return "".join(out)


full = [r for r in rows if int(r["requests"]) > 0]
print(f"{n} samples, {rows[0]['seconds']} s to {rows[-1]['seconds']} s; warm sample (the flatness check's reference): #{warm}, at {rows[warm]['seconds']} s.\n")
print("| metric | first | warm | last | min | max | trend (each character one minute: min ▁ … █ max) |")
print("|---|---|---|---|---|---|---|")
for name, col in metrics:
    vals = [float(r[col]) for r in full]
    w = float(rows[warm][col])
    last = float((full if col in ("p50_ms", "p99_ms", "requests") else rows)[-1][col])
    fmt = (lambda v: f"{v:.1f}") if "." in rows[0][col] else (lambda v: f"{v:.0f}")
    print(f"| {name} | {fmt(vals[0])} | {fmt(w)} | {fmt(last)} | {fmt(min(vals))} | {fmt(max(vals))} | `{trend(vals)}` |")
last = rows[-1]
print(f"\nTotals: {last['web_sent']} invoices sent from the web ({last.get('web_blocked', '?')} presses blocked), "
      f"{last['batch_runs']} batch runs, {last['errors']} failures; {sum(int(r['requests']) for r in rows)} web requests.")
