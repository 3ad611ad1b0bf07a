// What a Node.js service sees of idgen's replies, through ioredis and node-redis: integer
// replies become JavaScript numbers (53 bits) and lose the low bits of 63-bit IDs; with
// FORMAT decimal, base32 or base62 every ID arrives whole. Prints one JSON object.
//
//   node ids.mjs PORT
import Redis from "ioredis";
import { createClient } from "redis";

const port = Number(process.argv[2]);
const CALLS = 10000;

const distinct = (values) => new Set(values.map(String)).size;
const increasing = (values) => values.every((v, i) => i === 0 || values[i - 1] < v);

const ioredis = new Redis({ port, host: "127.0.0.1", lazyConnect: true });
await ioredis.connect();
const numbers = [];
for (let i = 0; i < 2000; i++) numbers.push(await ioredis.call("SNOWFLAKE.NEXT", "orders"));
const decimal = [];
for (let i = 0; i < CALLS; i++) {
  decimal.push(await ioredis.call("SNOWFLAKE.NEXT", "orders", "FORMAT", "decimal"));
}
const base62 = await ioredis.call("SNOWFLAKE.NEXT", "orders", "COUNT", CALLS, "FORMAT", "base62");
const segment = await ioredis.call("SEGMENT.NEXT", "invoice", "COUNT", 1000, "FORMAT", "decimal");
await ioredis.quit();

const nodeRedis = createClient({ socket: { port, host: "127.0.0.1" } });
await nodeRedis.connect();
const nodeRedisDecimal = [];
for (let i = 0; i < CALLS; i++) {
  nodeRedisDecimal.push(await nodeRedis.sendCommand(["SNOWFLAKE.NEXT", "users", "FORMAT", "decimal"]));
}
await nodeRedis.quit();

console.log(JSON.stringify({
  numbers: { calls: numbers.length, distinct: distinct(numbers), type: typeof numbers[0] },
  ioredis_decimal: {
    calls: decimal.length,
    distinct: distinct(decimal),
    increasing: increasing(decimal.map(BigInt)),
    type: typeof decimal[0],
    last: decimal[decimal.length - 1],
  },
  ioredis_base62: {
    calls: base62.length,
    distinct: distinct(base62),
    increasing: increasing(base62),
    last: base62[base62.length - 1],
  },
  node_redis_decimal: {
    calls: nodeRedisDecimal.length,
    distinct: distinct(nodeRedisDecimal),
    increasing: increasing(nodeRedisDecimal.map(BigInt)),
  },
  segment_range: segment,
}));
