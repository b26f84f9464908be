// The shape of a Grafana dashboard JSON file, derived from the Dashboard type of Grafana's
// foundation SDK. The SDK types what its builders produce, which is a little narrower than
// JSON can say, so this maps each SDK type to what the same value looks like in a file:
// - an enum becomes the values it stands for (graphTooltip: 1, "type": "query");
// - a data query (cog.Dataquery, a marker interface each datasource plugin extends) becomes
//   an open object: its fields depend on the plugin (expr, legendFormat, ...);
// - objects keep their fields, so a misspelled field ("titel") is still an error.
import type { Dashboard } from '@grafana/grafana-foundation-sdk/dashboard';
import type { Dataquery } from '@grafana/grafana-foundation-sdk/cog';

type AsJson<T> =
  T extends Dataquery ? { refId?: string; [field: string]: unknown }
  : T extends string ? `${T}`
  : T extends number ? number
  : T extends boolean ? boolean
  : T extends readonly (infer Item)[] ? AsJson<Item>[]
  : T extends object ? { [Field in keyof T]: AsJson<T[Field]> }
  : T;

export type DashboardJson = AsJson<Dashboard>;
