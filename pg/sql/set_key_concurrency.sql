-- SetKeyConcurrency: no notice; sessions read it when they start.
UPDATE {schema}.queues SET key_concurrency = $2::int WHERE name = $1
