/**
 * The transport's floor for `bench:epp`: an ext_proc server that does none of the picker's work.
 * Run as a process of its own (`node --import tsx bench/eppFloor.ts`), it prints `listening on
 * HOST:PORT` and answers each stream as `kvroute epp` does in FULL_DUPLEX_STREAMED, with the
 * picker's own message codec (`wireIn.ts`, `wire.ts`): when the body's last chunk arrives, the
 * header mutation naming a fixed endpoint, then the body sent back as streamed chunks. No body
 * decode, no JSON, no tokenizing, no pick: what an exchange costs gRPC on both sides.
 */
import { Server, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import type { ProcessingRequest, ProcessingResponse } from '../src/epp/messages.ts';
import { EXT_PROC_SERVICE, serviceDefinition } from '../src/epp/protos.ts';
import { encodeProcessingResponse } from '../src/epp/wire.ts';
import { decodeProcessingRequest } from '../src/epp/wireIn.ts';
import { pickAnswers } from './eppAnswers.ts';

const MAX_MESSAGE_BYTES = 8 << 20;

const definition = serviceDefinition(EXT_PROC_SERVICE);
const server = new Server({
  'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
});
server.addService(
  {
    Process: {
      ...definition.Process!,
      requestDeserialize: decodeProcessingRequest,
      responseSerialize: encodeProcessingResponse,
    },
  },
  {
    Process: (call: ServerDuplexStream<ProcessingRequest, ProcessingResponse>) => {
      call.on('data', (req: ProcessingRequest) => {
        const body = req.request_body;
        if (req.request !== 'request_body' || !body?.end_of_stream) return;
        const raw = body.body ?? Buffer.alloc(0);
        const bytes = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
        for (const r of pickAnswers(bytes)) call.write(r);
      });
      call.on('end', () => call.end());
    },
  },
);
server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, port) => {
  if (err) throw err;
  process.stdout.write(`listening on 127.0.0.1:${port}\n`);
});
process.once('SIGTERM', () => server.forceShutdown());
