import { Resvg } from '@resvg/resvg-js';

/** One line on the throughput chart; `floor` lines are drawn dashed, as the limit the others work against. */
export interface ChartSeries {
  readonly label: string;
  readonly points: ReadonlyArray<{ readonly concurrency: number; readonly value: number }>;
  readonly floor?: boolean;
}

export interface ThroughputChart {
  readonly title: string;
  readonly subtitle: string;
  readonly yLabel: string;
  /** Default: concurrency (connections / in-flight runs). */
  readonly xLabel?: string;
  readonly series: readonly ChartSeries[];
}

const WIDTH = 820;
const HEIGHT = 460;
const MARGIN = { left: 80, right: 250, top: 70, bottom: 60 } as const;
const COLOURS = ['#1f6feb', '#2da44e', '#bf8700', '#8250df', '#cf222e'] as const;
const FLOOR_COLOUR = '#57606a';

/**
 * Steps per second against concurrency. Concurrency is spaced on a log2 axis (1, 4, 16 are
 * equally far apart) and values on a linear axis from zero, so a ratio to the floor reads as
 * a vertical distance.
 */
export function renderChartSvg(chart: ThroughputChart): string {
  const xs = [...new Set(chart.series.flatMap((s) => s.points.map((p) => p.concurrency)))].sort((a, b) => a - b);
  const maxValue = Math.max(1, ...chart.series.flatMap((s) => s.points.map((p) => p.value)));
  const yTicks = niceTicks(maxValue * 1.1);
  const yMax = yTicks[yTicks.length - 1] ?? maxValue;
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const logMin = Math.log2(xs[0] ?? 1);
  const logSpan = Math.max(1, Math.log2(xs[xs.length - 1] ?? 1) - logMin);
  const xAt = (c: number): number => MARGIN.left + ((Math.log2(c) - logMin) / logSpan) * plotW;
  const yAt = (v: number): number => MARGIN.top + plotH - (v / yMax) * plotH;

  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="DejaVu Sans, Arial, sans-serif">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/>`,
    text(MARGIN.left, 28, chart.title, { size: 17, weight: 'bold' }),
    text(MARGIN.left, 50, chart.subtitle, { size: 12, fill: '#57606a' }),
  ];
  for (const tick of yTicks) {
    const y = yAt(tick);
    parts.push(
      `<line x1="${MARGIN.left}" y1="${y}" x2="${MARGIN.left + plotW}" y2="${y}" stroke="#d0d7de" stroke-width="1"/>`,
    );
    parts.push(text(MARGIN.left - 8, y + 4, formatTick(tick), { size: 12, anchor: 'end' }));
  }
  for (const c of xs) {
    const x = xAt(c);
    parts.push(
      `<line x1="${x}" y1="${MARGIN.top + plotH}" x2="${x}" y2="${MARGIN.top + plotH + 5}" stroke="#24292f"/>`,
    );
    parts.push(text(x, MARGIN.top + plotH + 20, String(c), { size: 12, anchor: 'middle' }));
  }
  parts.push(
    `<line x1="${MARGIN.left}" y1="${MARGIN.top + plotH}" x2="${MARGIN.left + plotW}" y2="${MARGIN.top + plotH}" stroke="#24292f"/>`,
    `<line x1="${MARGIN.left}" y1="${MARGIN.top}" x2="${MARGIN.left}" y2="${MARGIN.top + plotH}" stroke="#24292f"/>`,
    text(MARGIN.left + plotW / 2, HEIGHT - 16, chart.xLabel ?? 'concurrency (connections / in-flight runs)', {
      size: 13,
      anchor: 'middle',
    }),
    text(20, MARGIN.top + plotH / 2, chart.yLabel, { size: 13, anchor: 'middle', rotate: true }),
  );

  let colourIndex = 0;
  chart.series.forEach((series, index) => {
    const colour = series.floor ? FLOOR_COLOUR : COLOURS[colourIndex++ % COLOURS.length]!;
    const points = [...series.points].sort((a, b) => a.concurrency - b.concurrency);
    const path = points
      .map((p, i) => `${i === 0 ? 'M' : 'L'}${xAt(p.concurrency).toFixed(1)},${yAt(p.value).toFixed(1)}`)
      .join(' ');
    const dash = series.floor ? ' stroke-dasharray="8 5"' : '';
    parts.push(`<path d="${path}" fill="none" stroke="${colour}" stroke-width="${series.floor ? 2.5 : 2}"${dash}/>`);
    for (const p of points) {
      parts.push(
        `<circle cx="${xAt(p.concurrency).toFixed(1)}" cy="${yAt(p.value).toFixed(1)}" r="4" fill="${colour}"/>`,
      );
    }
    const legendY = MARGIN.top + 10 + index * 22;
    const legendX = MARGIN.left + plotW + 16;
    parts.push(
      `<line x1="${legendX}" y1="${legendY}" x2="${legendX + 26}" y2="${legendY}" stroke="${colour}" stroke-width="2.5"${dash}/>`,
    );
    parts.push(text(legendX + 32, legendY + 4, series.label, { size: 12 }));
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

/** Rasterises the SVG with the system's fonts (DejaVu Sans where present). */
export function renderChartPng(svg: string): Buffer {
  const resvg = new Resvg(svg, {
    fitTo: { mode: 'zoom', value: 2 },
    font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans' },
    background: '#ffffff',
  });
  return resvg.render().asPng();
}

function niceTicks(max: number): number[] {
  const rough = max / 5;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= rough) ?? rough;
  const ticks: number[] = [];
  for (let t = 0; t <= max + step / 2; t += step) ticks.push(Math.round(t * 1000) / 1000);
  return ticks;
}

function formatTick(value: number): string {
  return value >= 1000 ? `${(value / 1000).toLocaleString('en-US', { maximumFractionDigits: 2 })}k` : String(value);
}

function text(
  x: number,
  y: number,
  content: string,
  style: { size: number; weight?: string; fill?: string; anchor?: 'start' | 'middle' | 'end'; rotate?: boolean },
): string {
  const transform = style.rotate ? ` transform="rotate(-90 ${x} ${y})"` : '';
  return (
    `<text x="${x}" y="${y}" font-size="${style.size}" fill="${style.fill ?? '#24292f'}"` +
    ` text-anchor="${style.anchor ?? 'start'}"${style.weight ? ` font-weight="${style.weight}"` : ''}${transform}>` +
    `${escapeXml(content)}</text>`
  );
}

function escapeXml(value: string): string {
  return value.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}
