-- SetFairBy: no notice; sessions read it when they start.
UPDATE {schema}.queues SET fair_by = $2::text WHERE name = $1
