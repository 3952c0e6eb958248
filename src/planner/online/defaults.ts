/**
 * The online planner's defaults, for the shells without an HTTP server (`kvroute sim
 * --planner`): the same values as `serve --planner`'s (`src/serving/planner.ts`; a test checks
 * they agree), kept here so that the simulator's CLI need not load the gateway.
 */

/** The sliding window the traffic is fitted over, s. */
export const DEFAULT_PLANNER_WINDOW_S = 300;
/** How often the search runs, s. */
export const DEFAULT_PLANNER_INTERVAL_S = 30;
/** How long a lower answer must hold before the count goes down, s. */
export const DEFAULT_PLANNER_SCALE_DOWN_S = 300;
/** Most replicas the search tries (the answer when none meets the SLO). */
export const DEFAULT_PLANNER_MAX_REPLICAS = 64;
/** A replica the planner adds takes requests this long later (simulated start-up), s. */
export const DEFAULT_PLANNER_STARTUP_S = 60;
