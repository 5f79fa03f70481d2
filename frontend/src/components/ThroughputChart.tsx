import { useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { History } from "../rates";

const COLORS = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];

/** Records/s over time, one line per series of `history` (redrawn on every `version`). */
export function ThroughputChart({ history, version, height = 220 }: { history: History; version: number; height?: number }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const names = useRef<string>("");

  useEffect(() => {
    const el = box.current;
    if (!el || history.times.length === 0) return;
    const series = history.names();
    const data = [history.times, ...series.map((n) => history.series.get(n) ?? [])] as uPlot.AlignedData;
    if (plot.current && names.current === series.join("\n")) {
      plot.current.setData(data);
      return;
    }
    plot.current?.destroy();
    names.current = series.join("\n");
    plot.current = new uPlot(
      {
        width: Math.max(320, el.clientWidth || 640),
        height,
        series: [
          {},
          ...series.map((n, i) => ({ label: n, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: false })),
        ],
        axes: [{}, { label: "records/s", size: 70 }],
        scales: { y: { range: (_u: uPlot, _min: number, max: number) => [0, Math.max(1, max * 1.1)] } },
      },
      data,
      el,
    );
  }, [history, version, height]);

  useEffect(() => () => plot.current?.destroy(), []);
  return <div className="chart" ref={box} />;
}
