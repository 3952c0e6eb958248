/**
 * llama.cpp on transparent huge pages. On this kind of Linux VM, in its first half hour after
 * start, the first step that computes logits after prompt chunks (it reads the whole 65 MB
 * output matrix of the tiny model again) ran 25 -> 40 to 80 ms about half the time on 4 KiB
 * pages; on 2 MiB pages the spikes were gone (`bench/llamaCppProbes.ts --only E5` measures
 * both). llama.cpp reads its weights into malloc'd memory (`useMmap: false` in the engine's
 * loader), and glibc madvises its large regions for huge pages under `glibc.malloc.hugetlb=1`.
 * glibc reads that tunable once, at start, so a command that runs llama.cpp engines starts
 * itself again once with it (bin/kvroute.js). The child dies with its parent (an IPC channel
 * closes even on SIGKILL), gets its signals, and its exit is the parent's.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

const TUNABLE = 'glibc.malloc.hugetlb=1';
/** Set in the child's environment: it has a parent to follow. */
const CHILD_MARK = 'KVROUTE_HUGE_PAGES_CHILD';

/** Whether the kernel offers transparent huge pages (to madvised regions at least). */
export function hugePagesOnOffer(): boolean {
  try {
    return !readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8').includes('[never]');
  } catch {
    return false;
  }
}

/** True for a llama.cpp command on Linux with huge pages on offer and the tunable not yet set. */
export function wantsHugePages(
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  onOffer: () => boolean = hugePagesOnOffer,
): boolean {
  if (process.platform !== 'linux') return false;
  if ((env.GLIBC_TUNABLES ?? '').includes('glibc.malloc.hugetlb')) return false;
  const at = args.indexOf('--runtime');
  const llamaCpp =
    (at >= 0 && args[at + 1] === 'llama.cpp') || args.includes('--runtime=llama.cpp');
  return llamaCpp && onOffer();
}

/** Runs this command again with the tunable set; resolves when it has ended. */
export function rerunWithHugePages(binPath: string, args: readonly string[]): Promise<number> {
  const tunables = [process.env.GLIBC_TUNABLES, TUNABLE].filter(Boolean).join(':');
  const child = spawn(process.execPath, [...process.execArgv, binPath, ...args], {
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, GLIBC_TUNABLES: tunables, [CHILD_MARK]: '1' },
    // Its own process group: a terminal's Ctrl-C reaches it once, forwarded, not twice.
    detached: true,
  });
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  for (const s of signals) process.on(s, forward);
  return new Promise((resolve) => {
    child.on('error', (err) => {
      process.stderr.write(`kvroute: could not start itself again on huge pages: ${err.message}\n`);
      resolve(1);
    });
    child.on('exit', (code, signal) => {
      for (const s of signals) process.off(s, forward);
      if (signal !== null) process.kill(process.pid, signal);
      else resolve(code ?? 1);
    });
  });
}

/** In the child: die with the parent (its end of the channel closes when it dies). */
export function followParent(): void {
  if (process.env[CHILD_MARK] !== '1' || !process.channel) return;
  delete process.env[CHILD_MARK];
  process.channel.unref();
  process.on('disconnect', () => process.kill(process.pid, 'SIGKILL'));
}
