/** `statechart-agent/redis`: the Redis store (plain Redis 7 or a Redis Cluster, Lua compare-and-set, leases with fencing). */
export { RedisStore, type RedisStoreOptions } from './store/redis/redisStore.js';
export type { RedisClientBounds } from './store/redis/redisConnection.js';
export type { OwnerIndexReport } from './store/redis/redisErasure.js';
export { StoreDataLostError } from './errors.js';
export { MAX_BUCKETS, StoreLayoutError } from './store/redis/redisLayout.js';
export type { AgentErrorCode, RedisErrorCode, StoreErrorCode } from './errorCodes.js';
