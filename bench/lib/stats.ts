/**
 * Small numeric helpers for the benchmark: percentiles, medians and readable units.
 */

/** Nearest-rank percentile (p in [0, 100]) of unsorted values. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

export interface Latency {
  readonly p50: number;
  readonly p99: number;
}

export function latency(values: readonly number[]): Latency {
  return { p50: percentile(values, 50), p99: percentile(values, 99) };
}

/** Milliseconds in a unit a reader takes in at a glance: 20 ms, 1.4 ms, 85 µs. */
export function ms(value: number): string {
  if (!Number.isFinite(value)) return '–';
  if (value >= 100) return `${value.toFixed(0)} ms`;
  if (value >= 10) return `${value.toFixed(1)} ms`;
  if (value >= 1) return `${value.toFixed(2)} ms`;
  return `${(value * 1000).toFixed(0)} µs`;
}

export function ns(value: number): string {
  return value >= 1000 ? `${(value / 1000).toFixed(2)} µs` : `${value.toFixed(0)} ns`;
}

export function count(value: number): string {
  return value.toLocaleString('en-US');
}

/** Operations per second, abbreviated: 11.2 M/s, 840 k/s. */
export function rate(opsPerSecond: number): string {
  if (opsPerSecond >= 1e6) return `${(opsPerSecond / 1e6).toFixed(1)} M/s`;
  if (opsPerSecond >= 1e3) return `${(opsPerSecond / 1e3).toFixed(0)} k/s`;
  return `${opsPerSecond.toFixed(0)}/s`;
}

export function ratio(value: number): string {
  if (!Number.isFinite(value)) return '–';
  return value >= 10 ? `${value.toFixed(0)}×` : `${value.toFixed(2)}×`;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Starts `n` loads in one synchronous burst (as concurrent requests arrive) and resolves with
 * each one's latency in ms, from its own start to its answer.
 */
export async function burst(n: number, load: (i: number) => PromiseLike<unknown>): Promise<number[]> {
  const latencies = new Array<number>(n);
  const pending = new Array<PromiseLike<void>>(n);
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    pending[i] = load(i).then(() => {
      latencies[i] = performance.now() - started;
    });
  }
  await Promise.all(pending);
  return latencies;
}
