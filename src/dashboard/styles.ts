// The dashboard's one stylesheet (served at <dashboard>/style.css). Phone width first.
export const STYLESHEET = `
:root { --fg:#1d2330; --muted:#5d6677; --bg:#f6f7f9; --card:#fff; --line:#d9dde4; --accent:#2f5bd3;
  --ok:#1d7a46; --bad:#b42318; --warn:#805500; --run:#2f5bd3; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; }
* { box-sizing: border-box; }
[hidden] { display:none !important; }
body { margin:0; color:var(--fg); background:var(--bg); line-height:1.45; font-size:16px; }
a { color:var(--accent); }
a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible, textarea:focus-visible, summary:focus-visible
  { outline:3px solid #9db5f5; outline-offset:2px; }
.skip { position:absolute; left:-999px; } .skip:focus { left:8px; top:8px; background:#fff; padding:4px 8px; z-index:2; }
header.top { display:flex; flex-wrap:wrap; gap:.5rem 1rem; align-items:center; padding:.6rem 1rem; background:#1d2330; color:#fff; }
header.top a { color:#fff; }
.brand { font-weight:700; text-decoration:none; font-size:1.1rem; }
nav { display:flex; flex-wrap:wrap; gap:.5rem 1rem; align-items:center; flex:1; justify-content:space-between; }
nav ul { display:flex; flex-wrap:wrap; gap:.25rem .9rem; list-style:none; margin:0; padding:0; }
nav a[aria-current=page] { text-decoration:underline; text-underline-offset:4px; font-weight:600; }
nav .muted { color:#c3c9d4; }
nav .count { display:inline-block; min-width:1.4rem; padding:0 .4rem; border-radius:999px; background:#ffd666; color:#1d2330;
  font-weight:700; font-size:.8rem; text-align:center; }
.sr-only { position:absolute; width:1px; height:1px; padding:0; margin:-1px; overflow:hidden; clip:rect(0 0 0 0); white-space:nowrap;
  border:0; }
.h-sub { font-weight:400; font-size:1rem; color:var(--muted); }
.id { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size:.8rem; word-break:break-all; }
.flash dl.facts { margin-top:.4rem; }
main { max-width:72rem; margin:0 auto; padding:1rem; }
h1 { font-size:1.45rem; margin:.4rem 0 1rem; word-break:break-word; }
h2 { font-size:1.15rem; margin:1.6rem 0 .6rem; }
section > h2:first-child { margin-top:.2rem; }
ul.plain { list-style:none; padding:0; margin:0; } ul.plain > li + li { border-top:1px solid var(--line); }
section, .card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:.8rem 1rem; margin:0 0 1rem; }
.muted { color:var(--muted); }
.table-wrap { overflow-x:auto; }
table { border-collapse:collapse; width:100%; font-size:.94rem; }
th, td { text-align:left; padding:.45rem .5rem; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-weight:600; color:var(--muted); font-size:.85rem; }
dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:.3rem 1rem; margin:0; }
dl.facts dt { color:var(--muted); } dl.facts dd { margin:0; word-break:break-word; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size:.88rem; }
pre.json { background:#f0f2f5; padding:.6rem; border-radius:6px; overflow:auto; max-height:24rem; margin:.4rem 0; }
#event-types code, dl.facts dd code { overflow-wrap:anywhere; }
details.attempt-exchange[open] { min-width:min(28rem, 70vw); } details.attempt-exchange pre.json { white-space:pre-wrap;
  overflow-wrap:anywhere; max-width:min(40rem, 70vw); max-height:16rem; } details.attempt-exchange h3 { font-size:.9rem;
  margin:.5rem 0 .2rem; }
#rejections-table td[data-label="Subject"] { min-width:12rem; } details.fact pre.json { white-space:pre-wrap; overflow-wrap:anywhere;
  max-width:min(36rem, 60vw); max-height:16rem; }
.badge { display:inline-block; padding:.05rem .5rem; border-radius:999px; font-size:.8rem; font-weight:600; background:#e7e9ee;
  white-space:nowrap; }
.s-succeeded, .s-healthy, .s-ok, .s-approved, .s-success { background:#dcf3e5; color:var(--ok); }
.s-failed, .s-unhealthy, .s-rejected, .s-failure { background:#fde4e1; color:var(--bad); }
.s-cancelled, .s-degraded, .s-awaiting_approval { background:#fff2cc; color:var(--warn); }
.s-done { background:#dcf3e5; color:var(--ok); }
.w-active { background:#dcf3e5; color:var(--ok); } .w-failing { background:#fff2cc; color:var(--warn); } .w-disabled { background:#fde4e1;
  color:var(--bad); }
figure.chart { margin:.4rem 0 0; max-width:40rem; }
figure.chart svg .axis { stroke:#8a94a6; } figure.chart svg .grid { stroke:#e7e9ee; stroke-dasharray:3 3; }
figure.chart svg .tick { font-size:9px; fill:var(--muted); } figure.chart svg .target { fill:transparent; }
figure.chart svg .bar-success, .key-success { fill:var(--ok); background:var(--ok);
  } figure.chart svg .bar-failure, .key-failure { fill:var(--bad); background:var(--bad); }
.key { display:inline-block; width:.7rem; height:.7rem; border-radius:2px; vertical-align:middle; }
.s-started, .s-pending, .s-requested, .s-running { background:#e1e9fd; color:var(--run); }
.flash { padding:.6rem .8rem; border-radius:6px; margin:0 0 1rem; border:1px solid; }
.flash.ok { background:#e8f6ee; border-color:#a7d8b9; } .flash.error { background:#fdeceb; border-color:#f1b0aa; }
.flash p { margin:0; } .flash ul { margin:.3rem 0 0; padding-left:1.2rem; }
form.stack { display:grid; gap:.8rem; max-width:40rem; }
label { font-weight:600; display:block; margin-bottom:.2rem; }
.check label, label.check { font-weight:normal; display:inline-flex; gap:.35rem; align-items:center; margin:0 .8rem .2rem 0; }
input[type=text], input[type=password], input[type=url], select, textarea { width:100%; padding:.5rem; border:1px solid #aab2bf;
  border-radius:6px; font:inherit; background:#fff; }
textarea { min-height:7rem; font-family: ui-monospace, monospace; font-size:.88rem; }
.hint { color:var(--muted); font-size:.85rem; margin:.2rem 0 0; }
button, .button { white-space:nowrap; display:inline-block; font:inherit; padding:.45rem .9rem; border-radius:6px;
  border:1px solid var(--accent); background:var(--accent); color:#fff; cursor:pointer; text-decoration:none; min-height:2.4rem; }
button.secondary, .button.secondary { background:#fff; color:var(--accent); }
button.danger { background:var(--bad); border-color:var(--bad); }
button.link { background:none; border:none; color:inherit; text-decoration:underline; padding:0; min-height:0; }
form.inline { display:inline; margin:0; }
.actions { display:flex; flex-wrap:wrap; gap:.5rem; align-items:center; }
td .actions { gap:.3rem .5rem; }
fieldset { border:1px solid var(--line); border-radius:6px; padding:.6rem .8rem; margin:0; min-width:0; }
legend { font-weight:600; padding:0 .3rem; }
fieldset.resource { margin-bottom:.6rem; }
.resource .opts { display:grid; gap:.4rem; margin-top:.4rem; }
form:has(#all_events:checked) .resources { display:none; }
ul.diff { list-style:none; padding-left:0; margin:.3rem 0; } ul.diff ul { list-style:none; padding-left:1.2rem; }
.diff .add { color:var(--ok); } .diff .del { color:var(--bad); } .diff .chg { color:var(--warn); }
.labels { display:inline-flex; flex-wrap:wrap; gap:.25rem; } .label { background:#eef0f4; padding:0 .35rem; border-radius:4px; }
.secret-once { font-size:1rem; background:#fffbe6; border:1px dashed var(--warn); padding:.6rem; word-break:break-all; }
ol.steps { list-style:none; padding:0; } ol.steps > li > p:first-child { margin-top:0; }
details > summary { cursor:pointer; color:var(--accent); }
.step-error { color:var(--bad); }
.refresh { margin:0 0 .6rem; font-size:.9rem; }
dl.facts + form, dl.facts + .actions { margin-top:.8rem; }
section.trip { background:#fdeceb; border-color:#f1b0aa; }
section.group > h2 { margin-top:.2rem; } section.group ol.steps { margin:0; }
.bake, ul.children { margin:.4rem 0 0; } ul.verdicts, ul.children { padding-left:1.2rem; } .bake p { margin:.2rem 0; }
tr.row-vetoed td { background:#fff7f6; } .vetoed p { margin:0 0 .3rem; }
input.grow { flex:1; min-width:10rem; width:auto; }
ul.skipped { padding-left:1.2rem; margin:0; }
@media (max-width: 40rem) {
  main { padding:.6rem; }
  table.stack-sm thead { display:none; }
  table.stack-sm tr { display:block; border-bottom:1px solid var(--line); padding:.3rem 0; }
  table.stack-sm td { display:block; border:none; padding:.15rem .2rem; }
  table.stack-sm td[data-label]::before { content: attr(data-label) ": "; color:var(--muted); font-size:.85rem; }
}
`;
