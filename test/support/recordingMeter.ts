/**
 * A meter that keeps its instruments and lets a test collect, as a MeterProvider's reader would: `collect()` runs
 * every batch callback, waits for the async ones, and returns each observed point keyed by the instrument's name and
 * its `reason` or `state` attribute (`statechart_agent.starts.refused{tenant}`).
 */
import type { Attributes, Meter, ObservableCounter, ObservableGauge } from '@opentelemetry/api';

type Result = { observe(i: object, v: number, a?: Attributes): void };

export function recordingMeter() {
  const instruments = new Map<object, { name: string; kind: string; unit?: string }>();
  const callbacks = new Set<(result: Result) => void | Promise<void>>();
  const make = (kind: string) => (name: string, options?: { unit?: string }) => {
    const instrument = { name };
    instruments.set(instrument, { name, kind, unit: options?.unit });
    return instrument;
  };
  const meter = {
    createObservableGauge: make('gauge'),
    createObservableCounter: make('counter'),
    addBatchObservableCallback: (callback: never) => void callbacks.add(callback),
    removeBatchObservableCallback: (callback: never) => void callbacks.delete(callback),
  } as unknown as Meter;
  const collect = async () => {
    const points: Record<string, number> = {};
    await Promise.all(
      [...callbacks].map((callback) =>
        callback({
          observe(instrument: ObservableGauge | ObservableCounter, value: number, attributes: Attributes = {}) {
            const { name } = instruments.get(instrument)!;
            const label = attributes.reason ?? attributes.state;
            points[`${name}${label ? `{${String(label)}}` : ''}`] = value;
          },
        } as never),
      ),
    );
    return points;
  };
  return { meter, instruments, collect, callbacks };
}
