/**
 * What the picker sends back for one FULL_DUPLEX_STREAMED request, for `bench:epp`'s in-process
 * codec timings and for its floor (`eppFloor.ts`): the header mutation naming `endpoint` (with the
 * body's length and the `envoy.lb` metadata), then the body as streamed chunks.
 */
import {
  DESTINATION_HEADER,
  destinationMetadata,
  headerOption,
  type ProcessingResponse,
  streamedBody,
} from '../src/epp/messages.ts';

export const BENCH_ENDPOINT = '10.0.0.1:8000';

export function pickAnswers(body: Buffer, endpoint = BENCH_ENDPOINT): ProcessingResponse[] {
  return [
    {
      request_headers: {
        response: {
          clear_route_cache: true,
          header_mutation: {
            set_headers: [
              headerOption(DESTINATION_HEADER, endpoint),
              headerOption('content-length', String(body.length)),
            ],
          },
        },
      },
      dynamic_metadata: destinationMetadata(endpoint),
    },
    ...streamedBody('request_body', body, true),
  ];
}
