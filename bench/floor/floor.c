/*
 * The floor of a module command, written against redismodule.h and nothing of idgen's.
 *
 * IDFLOOR.NEXTID key   has SNOWFLAKE.NEXT's shape: a 14-character name, flags
 * "write deny-oom", one key (first 1, last 1, step 1). It opens the key for reading (as
 * SNOWFLAKE.NEXT does when it issues within the key's bound), closes it, and replies an
 * increasing 19-digit integer. It does nothing else, so whatever SNOWFLAKE.NEXT costs above
 * it is idgen's own work or idgen's binding, not Redis's.
 *
 * Built by scripts/floor-module.sh; used by scripts/module-floor.sh and scripts/bench.sh.
 */
#include "redismodule.h"

/* A 19-digit value, as a snowflake ID of today is. */
static long long next_value = 1000000000000000000LL;

static int next_id(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ);
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithLongLong(ctx, next_value++);
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "idfloor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return RedisModule_CreateCommand(ctx, "idfloor.nextid", next_id, "write deny-oom", 1, 1, 1);
}
