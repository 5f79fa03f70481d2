import { useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { clock } from "../connection";
import { formatValue, lastValue, tickStep, type ChartData } from "../series";

const COLORS = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];

/**
 * A time chart of `data` (epoch-second x axis, ticks on whole steps, HH:MM:SS labels) with its own
 * legend below showing each series' latest value, so values are visible without hovering.
 */
export function TimeChart({ data, unit, height = 200, testId }: { data: ChartData; unit: string; height?: number; testId?: string }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const names = useRef("");

  useEffect(() => {
    const el = box.current;
    if (!el || data.times.length === 0) return;
    const aligned = [data.times, ...data.series.map((s) => s.values)] as uPlot.AlignedData;
    const key = data.series.map((s) => s.name).join("\n");
    if (plot.current && names.current === key) {
      plot.current.setData(aligned);
      return;
    }
    plot.current?.destroy();
    names.current = key;
    plot.current = new uPlot(
      {
        width: Math.max(320, el.clientWidth || 640),
        height,
        legend: { show: false },
        series: [{}, ...data.series.map((s, i) => ({ label: s.name, stroke: COLORS[i % COLORS.length], width: 2 }))],
        axes: [
          {
            space: 70,
            splits: (_u: uPlot, _i: number, min: number, max: number) => {
              const step = tickStep(max - min);
              const out: number[] = [];
              for (let t = Math.ceil(min / step) * step; t <= max; t += step) out.push(t);
              return out;
            },
            values: (_u: uPlot, ticks: number[]) => ticks.map((t) => clock(t * 1000)),
          },
          { label: unit, size: 70 },
        ],
        scales: { x: { time: false }, y: { range: (_u: uPlot, _min: number, max: number) => [0, Math.max(1, max * 1.1)] } },
      },
      aligned,
      el,
    );
  }, [data, height, unit]);

  useEffect(() => () => plot.current?.destroy(), []);
  return (
    <div className="chart" data-testid={testId}>
      <div ref={box} />
      <ul className="legend">
        {data.series.map((s, i) => (
          <li key={s.name}>
            <span className="swatch" style={{ background: COLORS[i % COLORS.length] }} />
            {s.name}: <strong>{formatValue(lastValue(s.values))}</strong> {unit}
          </li>
        ))}
      </ul>
    </div>
  );
}
