// OpenAPI 3.1 document of /v1 (CONTRACT 4.4) and of the operations endpoints /healthz and /readyz
// (CONTRACT 1), generated from the route definitions that the router
// serves (src/http/api-route.ts): their paths, path parameters, request body schemas (the ones that
// validate requests) and response schemas (the ones that shape responses). zod writes the JSON
// Schema (draft 2020-12, the dialect of OpenAPI 3.1).
import { z } from 'zod';
import type { ApiRoute, ErrorStatus } from './api-route.ts';
import type { AttemptResult } from '../delivery/client.ts';
import { apiSchemas, errorSchema, type Same } from '../schemas/common.ts';
import type { deliveryStatusSchema, pingResultSchema } from '../schemas/webhooks.ts';
import type { DeliveryStatusView } from '../services/webhooks.ts';

type Json = Record<string, unknown>;

const componentRef = (id: string) => `#/components/schemas/${id}`;

const ERROR_DESCRIPTIONS: Record<ErrorStatus | 401 | 403 | 413 | 415, string> = {
  400: 'invalid_request: malformed JSON, wrong types, unknown fields or invalid values (details name each field path)',
  401: 'unauthorized: no or unknown API token',
  403:
    "forbidden: the API token is not valid for this org, X-Svc-Org-ID is missing, or the token's scope " +
    'does not cover the operation (the message names the scope needed); not_an_approver or self_approval: an approval ' +
    "response the step's approval policy does not admit (CONTRACT 10.4)",
  404: 'not_found: no such resource in this org',
  409:
    'conflict: a uniqueness rule or an illegal state change; limit_exceeded: a per-org limit of ' +
    'CONTRACT 8 (e.g. webhooks per org), named in the message; vetoed: applying an app config that is ' +
    'vetoed (the message carries the reason)',
  413: 'payload_too_large: the request body is over 1 MiB (the connection is closed)',
  415: 'unsupported_media_type: a body that is not application/json',
};

/** The named schemas of `apiSchemas`, referring to each other as `#/components/schemas/<id>`. */
function componentSchemas(): Record<string, Json> {
  const { schemas } = z.toJSONSchema(apiSchemas, {
    target: 'draft-2020-12',
    io: 'output',
    unrepresentable: 'any',
    metadata: apiSchemas,
    uri: componentRef,
  });
  const out: Record<string, Json> = {};
  for (const [id, schema] of Object.entries(schemas)) {
    const { $schema: _s, $id: _i, ...rest } = schema as Json;
    out[id] = rest;
  }
  return out;
}

/** Replace `#/$defs/<id>` by the component of that id (every named schema is a component). */
function toComponentRefs(node: unknown, components: Record<string, Json>): unknown {
  if (Array.isArray(node)) return node.map((x) => toComponentRefs(x, components));
  if (node === null || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node as Json)) {
    if (k === '$defs' || k === '$schema') continue;
    if (k === '$ref' && typeof v === 'string' && v.startsWith('#/$defs/')) {
      const id = v.slice('#/$defs/'.length);
      if (!(id in components)) throw new Error(`schema ${id} is not a component`);
      out[k] = componentRef(id);
    } else out[k] = toComponentRefs(v, components);
  }
  return out;
}

/** A response body schema: named schemas become references to their component. */
function responseSchema(schema: z.ZodType, components: Record<string, Json>): Json {
  const js = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'output', unrepresentable: 'any', metadata: apiSchemas, cycles: 'ref' });
  return toComponentRefs(js, components) as Json;
}

/** A request body schema, inline (what the API accepts, as zod validates it). */
function requestSchema(schema: z.ZodType): Json {
  const { $schema: _s, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as Json;
  return rest;
}

function operation(route: ApiRoute, components: Record<string, Json>): Json {
  const responses: Json = {};
  for (const [status, def] of Object.entries(route.responses)) {
    if (!def) continue;
    responses[status] = {
      description: def.description,
      ...(def.schema ? { content: { 'application/json': { schema: responseSchema(def.schema, components) } } } : {}),
    };
  }
  const errors = new Set<ErrorStatus | 401 | 403 | 413 | 415>(route.errors);
  if (!route.public) [401, 403].forEach((s) => errors.add(s as 401 | 403));
  if (route.body) [400, 413, 415].forEach((s) => errors.add(s as 400 | 413 | 415));
  if (route.query) errors.add(400);
  for (const status of [...errors].sort()) {
    responses[String(status)] = {
      description: ERROR_DESCRIPTIONS[status],
      content: { 'application/json': { schema: { $ref: componentRef('Error') } } },
    };
  }
  return {
    operationId: route.operationId,
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    tags: [route.tag],
    // The scope as OpenAPI 3.1 states a role: a Security Requirement may list "role names which are
    // required for the execution" for any scheme type (3.1 §4.8.30; in 3.0 only oauth2 and
    // openIdConnect could). So `security: [{bearer: ['deploy'], org: []}]`: Swagger UI shows it by
    // the operation and openapi-typescript carries it through, with no fake oauth2 flow to explain.
    security: route.public ? [] : [{ bearer: [route.scope], org: [] }],
    'x-svc-scope': route.scope,
    ...(route.paramNames.length || route.query
      ? {
          parameters: [
            ...route.paramNames.map((name) => ({
              name,
              in: 'path',
              required: true,
              schema: requestSchema(route.params.shape[name]),
            })),
            ...Object.entries(route.query?.shape ?? {}).map(([name, schema]) => ({
              name,
              in: 'query',
              required: !schema.safeParse(undefined).success,
              ...(schema.description ? { description: schema.description } : {}),
              schema: requestSchema(schema),
            })),
          ],
        }
      : {}),
    ...(route.body
      ? {
          requestBody: {
            required: !route.body.optional,
            content: { 'application/json': { schema: requestSchema(route.body.schema) } },
          },
        }
      : {}),
    responses,
  };
}

/**
 * Operations endpoints outside /v1 (CONTRACT 1), served by src/http/app.ts without authentication:
 * liveness and readiness, for load balancers, Kubernetes probes and compose healthchecks.
 */
export const OPERATIONS_PATHS: Record<string, Json> = {
  '/healthz': {
    get: {
      operationId: 'getHealth',
      summary: 'liveness: 200 while the process runs',
      description:
        'Answers 200 from the moment the HTTP port is bound until the process exits, during a ' +
        'shutdown drain too. A liveness probe, not a readiness probe: use /readyz to decide whether ' +
        'to send traffic.',
      tags: ['operations'],
      security: [],
      responses: {
        200: {
          description: 'the process runs',
          content: {
            'application/json': {
              schema: { type: 'object', properties: { ok: { const: true } }, required: ['ok'], additionalProperties: false },
            },
          },
        },
      },
    },
  },
  '/readyz': {
    get: {
      operationId: 'getReadiness',
      summary: 'readiness: 200 only while this process should get traffic',
      description:
        'Answers 200 once svc serve is ready (the HTTP port bound, every NATS subscription it ' +
        'answers on confirmed by the server, the relay and the consumers started: the moment it ' +
        'prints `listening on`), and 503 with the reasons before that, while the NATS connection is ' +
        'down or reconnecting, while a JetStream stream or consumer svc needs has no leader (a NATS ' +
        'cluster electing one), and from SIGTERM on (traffic moves before the drain).',
      tags: ['operations'],
      security: [],
      responses: {
        200: {
          description: 'ready',
          content: {
            'application/json': {
              schema: { type: 'object', properties: { ready: { const: true } }, required: ['ready'], additionalProperties: false },
            },
          },
        },
        503: {
          description: 'not ready: starting, the NATS connection down, a JetStream stream or consumer without a leader, or shutting down',
          content: {
            'application/json': {
              schema: {
                type: 'object',
                properties: { ready: { const: false }, reasons: { type: 'array', items: { type: 'string' }, minItems: 1 } },
                required: ['ready', 'reasons'],
                additionalProperties: false,
              },
            },
          },
        },
      },
    },
  },
};

const cache = new WeakMap<readonly ApiRoute[], Json>();

/** The OpenAPI 3.1 document of these routes (made once per route table). */
export function openApiDocument(routes: readonly ApiRoute[]): Json {
  const cached = cache.get(routes);
  if (cached) return cached;
  if (!apiSchemas.get(errorSchema)) throw new Error('the Error schema must be a component');
  const components = componentSchemas();
  const paths: Record<string, Json> = { ...OPERATIONS_PATHS };
  for (const route of routes) {
    const item = (paths[route.path] ??= {});
    if (item[route.method]) throw new Error(`${route.method} ${route.path} is defined twice`);
    item[route.method] = operation(route, components);
  }
  const doc: Json = {
    openapi: '3.1.0',
    info: {
      title: 'svc API',
      version: '1',
      description: 'Webhooks that receive CloudEvents, and the apps, installs and workflows they report on. Errors: CONTRACT 3.',
    },
    tags: [...new Set([...routes.map((r) => r.tag), 'operations'])].map((name) => ({ name })),
    security: [{ bearer: [], org: [] }],
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description:
            "an API token of the org. Its scope (CONTRACT 2) is what it may do; each operation's " +
            '`security` names the scope it needs: `read` (every GET but the audit log), `webhooks` ' +
            "(read, plus the webhooks' writes), `deploy` (read, plus apps, configs, branches, " +
            'installs, runs, rollbacks, approvals, cancel, veto), `admin` (everything). A token ' +
            'outside its scope is answered 403 `forbidden` naming the scope needed.',
        },
        org: { type: 'apiKey', in: 'header', name: 'X-Svc-Org-ID', description: 'the org id' },
      },
    },
  };
  cache.set(routes, doc);
  return doc;
}

// ------------------------------------------------------------------ the document's schemas and the types the code uses agree

const sameTypes: [Same<z.infer<typeof deliveryStatusSchema>, DeliveryStatusView>, Same<z.infer<typeof pingResultSchema>, AttemptResult>] = [
  true,
  true,
];
void sameTypes;
