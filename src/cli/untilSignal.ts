/** The end of a server command (`kvroute engine`, `kvroute serve`): run until told to stop. */

/** Waits for SIGINT or SIGTERM, then closes what the command started; exit status 0. */
export async function serveUntilSignal(close: () => Promise<void>): Promise<number> {
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await close();
  return 0;
}
