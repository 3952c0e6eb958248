/**
 * The vendored `.proto` files (`proto/`, see `proto/SOURCES.md`) loaded once with
 * `@grpc/proto-loader`: Envoy's external processing service and gRPC's health service. Message
 * fields keep their proto names (`request_headers`, `raw_value`), enums are their names, bytes
 * are Buffers, and a set oneof names itself (`request: 'request_body'`).
 *
 * One catch, from protobufjs: `google.protobuf.Struct` and `Value` come from its bundled
 * well-known types, whose fields are camelCase whatever `keepCase` says (`structValue`,
 * `stringValue`, `listValue`); a snake_case key there is dropped without a word.
 */
import { fileURLToPath } from 'node:url';
import { loadPackageDefinition, type ServiceDefinition } from '@grpc/grpc-js';
import { loadSync, type PackageDefinition } from '@grpc/proto-loader';

/** The include root: the directory layout is the import path. */
export const PROTO_DIR = fileURLToPath(new URL('../../proto', import.meta.url));

export const EXT_PROC_SERVICE = 'envoy.service.ext_proc.v3.ExternalProcessor';
export const HEALTH_SERVICE = 'grpc.health.v1.Health';

const ROOTS = ['envoy/service/ext_proc/v3/external_processor.proto', 'grpc/health/v1/health.proto'];

export const LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

let loaded: PackageDefinition | null = null;

/** The package definition of both services (parsed on first use, then shared). */
export function eppPackage(): PackageDefinition {
  loaded ??= loadSync(ROOTS, LOADER_OPTIONS);
  return loaded;
}

export function serviceDefinition(name: typeof EXT_PROC_SERVICE | typeof HEALTH_SERVICE) {
  return eppPackage()[name] as ServiceDefinition;
}

/** Client constructors by full name, for Envoy's side in tests and the benchmark. */
export function eppClients(): {
  ExternalProcessor: ClientConstructor;
  Health: ClientConstructor;
} {
  const grpcObject = loadPackageDefinition(eppPackage()) as unknown as {
    envoy: { service: { ext_proc: { v3: { ExternalProcessor: ClientConstructor } } } };
    grpc: { health: { v1: { Health: ClientConstructor } } };
  };
  return {
    ExternalProcessor: grpcObject.envoy.service.ext_proc.v3.ExternalProcessor,
    Health: grpcObject.grpc.health.v1.Health,
  };
}

// biome-ignore lint/suspicious/noExplicitAny: generated clients are untyped (no codegen step)
export type ClientConstructor = new (address: string, credentials: unknown) => any;
