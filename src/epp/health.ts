/**
 * The gRPC health service (`grpc.health.v1.Health`) a Gateway and the kubelet probe, with the
 * service names of the endpoint picker protocol: `liveness` (SERVING while the process answers),
 * `readiness` and `envoy.service.ext_proc.v3.ExternalProcessor` (SERVING once a model pool has a
 * backend in its router: the picker can pick), the empty name (the server as a whole, as
 * readiness) and `inference-extension` (the name the extension's manifests probe, as
 * readiness). An unknown name is NOT_FOUND on Check and SERVICE_UNKNOWN on Watch, as the gRPC
 * health protocol says. Closing turns everything NOT_SERVING first.
 */
import {
  type sendUnaryData,
  type ServerUnaryCall,
  type ServerWritableStream,
  status,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { EXT_PROC_SERVICE } from './protos.ts';

export type ServingStatus = 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

/** Watchers are told of a change within this long. */
export const WATCH_POLL_MS = 1_000;

export const HEALTH_SERVICES = [
  '',
  'liveness',
  'readiness',
  EXT_PROC_SERVICE,
  'inference-extension',
] as const;

export class EppHealth {
  readonly #ready: () => boolean;
  #closing = false;

  /** `ready`: whether the picker can pick now. */
  constructor(ready: () => boolean) {
    this.#ready = ready;
  }

  /** Everything NOT_SERVING from now on (the server is shutting down). */
  close(): void {
    this.#closing = true;
  }

  status(service: string): ServingStatus {
    if (!(HEALTH_SERVICES as readonly string[]).includes(service)) return 'SERVICE_UNKNOWN';
    if (this.#closing) return 'NOT_SERVING';
    if (service === 'liveness') return 'SERVING';
    return this.#ready() ? 'SERVING' : 'NOT_SERVING';
  }

  implementation(): UntypedServiceImplementation {
    return {
      Check: (
        call: ServerUnaryCall<{ service?: string }, unknown>,
        callback: sendUnaryData<{ status: ServingStatus }>,
      ) => {
        const service = call.request.service ?? '';
        const s = this.status(service);
        if (s === 'SERVICE_UNKNOWN') {
          callback({ code: status.NOT_FOUND, details: `unknown service '${service}'` });
        } else callback(null, { status: s });
      },
      List: (_call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
        const statuses: Record<string, { status: ServingStatus }> = {};
        for (const name of HEALTH_SERVICES) statuses[name] = { status: this.status(name) };
        callback(null, { statuses });
      },
      Watch: (call: ServerWritableStream<{ service?: string }, { status: ServingStatus }>) => {
        const service = call.request.service ?? '';
        let last = this.status(service);
        call.write({ status: last });
        const timer = setInterval(() => {
          const now = this.status(service);
          if (now !== last) call.write({ status: (last = now) });
        }, WATCH_POLL_MS);
        timer.unref();
        const stop = () => clearInterval(timer);
        call.once('cancelled', stop);
        call.once('close', stop);
        call.once('error', stop);
      },
    };
  }
}
