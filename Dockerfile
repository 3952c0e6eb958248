# kvroute: the gateway (`kvroute serve`) or a simulated engine (`kvroute engine`) in one image.
# Build: docker build -t kvroute:0.1.0 .
# Run:   docker run -p 8080:8080 kvroute:0.1.0            # gateway + embedded simulated fleet
#        docker run kvroute:0.1.0 engine --host 0.0.0.0    # one simulated vLLM-compatible engine
#        docker run kvroute:0.1.0 epp --host 0.0.0.0 ...   # the inference extension's endpoint picker

# Stage 1: runtime dependencies only, exactly as package-lock.json pins them. tsx is one of
# them: the bin runs the TypeScript sources through it, so there is no build output to copy.
FROM node:20-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# Stage 2: the sources on top, run as the image's unprivileged `node` user (uid 1000).
FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json kvroute.example.yaml ./
COPY bin ./bin
COPY src ./src
# Envoy's ext_proc and gRPC health definitions, loaded at run time by `kvroute epp`.
COPY proto ./proto
USER node
# 8080: the gateway (OpenAI API, /metrics, the dashboard at /); 8001: an engine's HTTP port;
# 5557 / 5558: an engine's KV events (ZMQ PUB) and replay (ZMQ ROUTER); 9002 / 9003 / 9090: the
# endpoint picker's ext_proc, gRPC health and metrics ports.
EXPOSE 8080 8001 5557 5558 9002 9003 9090
# The gateway's /health (liveness: 200 once it listens) on KVROUTE_PORT: a gateway run on another
# port (--port N) sets KVROUTE_PORT=N too. (An engine container overrides this with its port.)
# Readiness (every model has a healthy backend) is /ready.
ENV KVROUTE_PORT=8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.KVROUTE_PORT || 8080) + '/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "bin/kvroute.js"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
