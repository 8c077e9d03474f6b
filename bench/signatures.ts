// Micro-benchmark of what trust costs per event and per attempt: the per-attempt signature headers
// (src/delivery/signing.ts) and the engine's seal on the bus (src/bus/seal.ts, once per event
// at the relay, checked once per event by the data plane):
//   npx tsx bench/signatures.ts            (BENCH_N iterations per case, default 200000)
// Prints µs per call for a ~1 KB CloudEvent body: no secret, one secret (plain and whsec_),
// a rotation's overlap (two webhook-signature entries), and the key preparation done once per
// webhook. Checking a delivery (svc listen) is measured too.
import { encodeHopBatch } from '../src/bus/hop.ts';
import { Seal, newDataplaneKey } from '../src/bus/seal.ts';
import { signatureHeaders, signingKeys, checkDelivery } from '../src/delivery/signing.ts';

const N = Number(process.env.BENCH_N ?? 200_000);

const event = {
  specversion: '1.0',
  id: '3f1c2a9e-6b7d-4e0f-9a51-0c2d4e6f8a1b',
  type: 'com.svc.workflow.lifecycle.v1',
  source: '//127.0.0.1:8080/ctl-api',
  time: '2026-01-02T03:04:05.678Z',
  subject: 'org_1/workflow/wf_1/succeeded',
  datacontenttype: 'application/json',
  svcorgid: 'org_1',
  interests: ['resource:installs', 'op:installs.provision', 'event:lifecycle.succeeded', 'outcome:completion'],
  data: { kind: 'workflow', transition: 'succeeded', note: 'x'.repeat(620) },
};
const body = Buffer.from(JSON.stringify(event));
const now = Date.parse('2026-01-02T03:04:06Z');
const plain = signingKeys({ secret: 'a-plain-shared-secret-of-32-chars' })!;
const whsec = signingKeys({ secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' })!;
const overlap = signingKeys({
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  previous_secret: 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD',
  previous_secret_expires_at: '2026-01-09T00:00:00Z',
})!;
const received = signatureHeaders(whsec, event.id, body, now);

let sink = 0;
function bench(name: string, fn: () => unknown): void {
  for (let i = 0; i < Math.min(N, 20_000); i++) fn(); // warm up
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) {
    const r = fn();
    if (r) sink++;
  }
  const us = Number(process.hrtime.bigint() - t0) / N / 1000;
  console.log(`${name.padEnd(52)} ${us.toFixed(2).padStart(7)} µs/call`);
}

console.log(`body ${body.length} bytes, ${N} calls per case, node ${process.version}`);
bench('signatureHeaders, no secret', () => signatureHeaders(null, event.id, body, now));
bench('signatureHeaders, plain secret', () => signatureHeaders(plain, event.id, body, now));
bench('signatureHeaders, whsec_ secret', () => signatureHeaders(whsec, event.id, body, now));
bench('signatureHeaders, rotation overlap (2 x v1)', () => signatureHeaders(overlap, event.id, body, now));
bench('signingKeys (once per webhook), overlap', () =>
  signingKeys({
    secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    previous_secret: 'old',
    previous_secret_expires_at: '2026-01-09T00:00:00Z',
  }),
);
const seal = new Seal(newDataplaneKey());
const route = '1|org_1|installs|installs.provision|completion|inst_1||';
// a batch of one event (src/bus/hop.ts): under load a batch holds many, and its seal is paid once
const batch = encodeHopBatch([{ id: event.id, route, body }]);
const sealed = seal.sealHop(event.id, batch, now);
bench('seal a batch of one event (relay, once per batch)', () => seal.sealHop(event.id, batch, now));
bench('open a sealed batch of one event (data plane, once per batch)', () => seal.openHop(event.id, batch, sealed));
// the replay check on top of opening: JetStream's stored time, from the ack subject of a delivery
const ackSubject = `$JS.ACK.SVC_EVENTS.svc-dispatch.1.123456.123456.${now * 1_000_000}.0`;
bench('open + replay check (stored time from the ack subject)', () => {
  const at = seal.openHop(event.id, batch, sealed);
  const stored = Number(ackSubject.split('.')[7]) / 1e6;
  return at !== null && stored - at < 120_000;
});
bench(
  'checkDelivery (svc listen), both signatures',
  () => checkDelivery(whsec, received as unknown as Record<string, string>, body, now).ok,
);
if (sink < 0) console.log(sink);
