/**
 * The per-minute chart of the overview (uPlot on a canvas): jobs completed and failed per minute
 * over the last hour, from `GET api/stats`.
 */
import { html } from "htm/preact"
import { useEffect, useRef } from "preact/hooks"
import uPlot from "uplot"

export interface Series {
  /** Unix seconds of each minute, oldest first. */
  readonly minutes: ReadonlyArray<number>
  readonly completed: ReadonlyArray<number>
  readonly failed: ReadonlyArray<number>
}

export const ThroughputChart = ({ series }: { series: Series }) => {
  const box = useRef<HTMLDivElement>(null)
  const plot = useRef<uPlot | undefined>(undefined)
  const data = [series.minutes.slice(), series.completed.slice(), series.failed.slice()] as uPlot.AlignedData
  useEffect(() => {
    const element = box.current!
    plot.current = new uPlot({
      width: Math.max(320, element.clientWidth),
      height: 220,
      cursor: { drag: { x: false, y: false } },
      scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      axes: [{}, { label: "jobs / min", size: 60 }],
      series: [
        {},
        { label: "completed", stroke: "#2f855a", fill: "rgba(47,133,90,0.12)", width: 2 },
        { label: "failed", stroke: "#c53030", fill: "rgba(197,48,48,0.12)", width: 2 }
      ]
    }, data, element)
    const onResize = () => plot.current?.setSize({ width: Math.max(320, element.clientWidth), height: 220 })
    addEventListener("resize", onResize)
    return () => {
      removeEventListener("resize", onResize)
      plot.current?.destroy()
      plot.current = undefined
    }
  }, [])
  useEffect(() => {
    plot.current?.setData(data)
  })
  return html`<div class="chart" ref=${box} data-testid="throughput-chart"></div>`
}
