export * from './catalog.ts';
export * from './cost.ts';
export * from './spec.ts';
export * from './plan.ts';
export * from './calibration.ts';
export * from './stepTable.ts';
