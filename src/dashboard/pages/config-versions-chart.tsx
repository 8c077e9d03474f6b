// The app page's picture of its fleet (issue 29): how many installs run each config version, as a
// server-rendered SVG bar chart, newest version first; a vetoed version's bar is marked, and the
// installs on no config yet get a bar of their own. The counts are the configs table's.

export interface VersionBar {
  app_config_id: string;
  version: number;
  vetoed: boolean;
}

const BAR = 16;
const GAP = 6;
const LABEL = 70;
const PLOT = 360;
const FILL = { current: '#2563eb', vetoed: '#b91c1c', none: '#9ca3af' } as const;

export const ConfigVersionsChart = ({
  configs,
  installsOn,
  total,
}: {
  configs: VersionBar[];
  installsOn: Map<string, number>;
  total: number;
}) => {
  if (!configs.length || !total) return null;
  const onNone = total - [...installsOn.values()].reduce((a, b) => a + b, 0);
  const bars = [
    ...[...configs]
      .sort((a, b) => b.version - a.version)
      .map((cfg) => ({
        label: `v${cfg.version}`,
        title: cfg.app_config_id,
        n: installsOn.get(cfg.app_config_id) ?? 0,
        fill: cfg.vetoed ? FILL.vetoed : FILL.current,
        vetoed: cfg.vetoed,
      })),
    ...(onNone > 0 ? [{ label: 'none', title: 'installs on no config yet', n: onNone, fill: FILL.none, vetoed: false }] : []),
  ];
  const most = Math.max(1, ...bars.map((b) => b.n));
  const width = LABEL + PLOT + 150;
  const height = bars.length * (BAR + GAP) + 4;
  const summary = bars.map((b) => `${b.label}: ${b.n}${b.vetoed ? ' (vetoed)' : ''}`).join(', ');
  return (
    <figure class="chart config-versions">
      <svg
        id="config-versions-chart"
        role="img"
        aria-label={`Installs per config version: ${summary}`}
        width={width}
        height={height}
        viewBox={`0 0 ${width} ${height}`}
        xmlns="http://www.w3.org/2000/svg"
      >
        {bars.map((b, i) => {
          const y = i * (BAR + GAP);
          const w = b.n ? Math.max(2, Math.round((b.n / most) * PLOT)) : 0;
          return (
            <g>
              <text x={0} y={y + BAR - 3} font-size="13" fill="#1f2937">
                {b.label}
              </text>
              <rect x={LABEL} y={y} width={PLOT} height={BAR} rx={2} fill="#f3f4f6" />
              {w ? (
                <rect class="version-bar" x={LABEL} y={y} width={w} height={BAR} rx={2} fill={b.fill}>
                  <title>{`${b.label} (${b.title}): ${b.n} of ${total} installs${b.vetoed ? ', vetoed' : ''}`}</title>
                </rect>
              ) : null}
              <text x={LABEL + PLOT + 8} y={y + BAR - 3} font-size="12" fill={b.vetoed ? FILL.vetoed : '#4b5563'}>
                {`${b.n} of ${total}${b.vetoed ? ' · vetoed' : ''}`}
              </text>
            </g>
          );
        })}
      </svg>
      <figcaption class="muted hint">Installs on each config version.</figcaption>
    </figure>
  );
};
