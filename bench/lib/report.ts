/**
 * The shape of a result row and the markdown it becomes: one row per workload, one column per
 * system, plus the ratio herdcache / best peer.
 */
import { cpus } from 'node:os';

export const SYSTEMS = {
  herdcache: 'herdcache',
  noCache: 'no cache',
  dataloaderPerRequest: 'DataLoader per request',
  dataloaderShared: 'DataLoader shared',
  asyncCacheDedupe: 'async-cache-dedupe',
  bentocache: 'bentocache',
  responseCaches: 'Apollo / Envelop response cache',
  limit: 'physical limit',
} as const;

export type SystemId = keyof typeof SYSTEMS;

export interface Row {
  /** "1. Stampede, one process" */
  readonly workload: string;
  /** What the cells measure, e.g. "fills · p50 / p99". */
  readonly measure: string;
  readonly cells: Partial<Record<SystemId, string>>;
  /** herdcache / best peer. */
  readonly ratio: string;
  /** Said under the table: how it was measured, and what a figure means. */
  readonly notes: readonly string[];
  /** Set when the workload did not run; cells are then empty. */
  readonly skipped?: string;
  /** Fills per system, for the stampede chart (bench/stampede.svg). */
  readonly fills?: Partial<Record<SystemId, number>>;
}

export function skippedRow(workload: string, measure: string, why: string): Row {
  return { workload, measure, cells: {}, ratio: '–', notes: [], skipped: why };
}

function escapeCell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, '<br>');
}

export function markdownTable(rows: readonly Row[]): string {
  const ids = Object.keys(SYSTEMS) as SystemId[];
  const head = ['workload', ...ids.map((id) => SYSTEMS[id]), 'herdcache / best peer'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const row of rows) {
    const title = `**${row.workload}**<br>${row.measure}`;
    const cells =
      row.skipped !== undefined
        ? [`skipped (${row.skipped})`, ...ids.slice(1).map(() => ''), '']
        : [...ids.map((id) => row.cells[id] ?? 'n/a'), row.ratio];
    lines.push(`| ${[title, ...cells].map(escapeCell).join(' | ')} |`);
  }
  return lines.join('\n');
}

export function markdownNotes(rows: readonly Row[]): string {
  const out: string[] = [];
  for (const row of rows) {
    if (row.notes.length === 0) continue;
    out.push(`**${row.workload}**`, '', ...row.notes.map((note) => `- ${note}`), '');
  }
  return out.join('\n');
}

export function machine(): string {
  const list = cpus();
  const model = list[0]?.model.trim() ?? 'unknown CPU';
  return `${list.length} cores, ${model}, Node ${process.version}, ${process.platform}/${process.arch}`;
}
