/**
 * The stampede rows as a picture: fills per system on a log scale (1 to 10,000), one group of
 * bars per workload. Plain SVG written by hand: no dependency for a dozen rectangles.
 */
import { SYSTEMS, type Row, type SystemId } from './report';

const ORDER: SystemId[] = [
  'noCache',
  'dataloaderPerRequest',
  'dataloaderShared',
  'asyncCacheDedupe',
  'bentocache',
  'herdcache',
];
const BAR = 18;
const GAP = 6;
const LABEL = 190;
const WIDTH = 720;
const PLOT = WIDTH - LABEL - 90;

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

export function stampedeChart(rows: readonly Row[]): string | undefined {
  const groups = rows.filter((row) => row.fills !== undefined && Object.keys(row.fills).length > 0);
  if (groups.length === 0) return undefined;
  const max = Math.max(...groups.flatMap((row) => Object.values(row.fills!) as number[]), 10);
  const decades = Math.ceil(Math.log10(max));
  const x = (value: number) => LABEL + (Math.log10(Math.max(value, 1)) / decades) * PLOT;
  const parts: string[] = [];
  let y = 40;
  for (const row of groups) {
    parts.push(`<text x="8" y="${y}" font-weight="bold">${escape(row.workload)}: fills (log scale)</text>`);
    y += 12;
    for (const id of ORDER) {
      const value = row.fills![id];
      if (value === undefined) continue;
      const herd = id === 'herdcache';
      const width = Math.max(x(value) - LABEL, 2);
      parts.push(
        `<text x="${LABEL - 8}" y="${y + BAR - 5}" text-anchor="end">${escape(SYSTEMS[id])}</text>`,
        `<rect x="${LABEL}" y="${y}" width="${width.toFixed(1)}" height="${BAR}" fill="${herd ? '#2f7d32' : '#9e9e9e'}"/>`,
        `<text x="${(LABEL + width + 6).toFixed(1)}" y="${y + BAR - 5}"${herd ? ' font-weight="bold"' : ''}>${Number.isInteger(value) ? value.toLocaleString('en-US') : value.toFixed(1)}</text>`,
      );
      y += BAR + GAP;
    }
    y += 24;
  }
  const ticks: string[] = [];
  for (let d = 0; d <= decades; d++) {
    const tx = LABEL + (d / decades) * PLOT;
    ticks.push(
      `<line x1="${tx}" y1="24" x2="${tx}" y2="${y - 24}" stroke="#e0e0e0"/>`,
      `<text x="${tx}" y="18" text-anchor="middle" fill="#757575">${(10 ** d).toLocaleString('en-US')}</text>`,
    );
  }
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${y}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${y}" fill="white"/>`,
    ...ticks,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}
