#!/usr/bin/env python3
"""Enqueue into a partq queue from Python, through psycopg2 (Debian: python3-psycopg2).

The items are written in the transaction of your own connection: they exist, and
the workers are woken, exactly when it commits. Connection settings come from
libpq's PG* variables (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD) or a DSN
in $PARTQ_DSN; partq's schema from $PARTQ_SCHEMA (default "partq").

    python3 enqueue.py orders
"""
import json
import os
import sys

import psycopg2
from psycopg2 import sql

queue = sys.argv[1] if len(sys.argv) > 1 else "orders"
schema = sql.Identifier(os.environ.get("PARTQ_SCHEMA", "partq"))
conn = psycopg2.connect(os.environ.get("PARTQ_DSN", ""))

# `with conn` is one transaction: COMMIT at the end of the block, ROLLBACK on
# an exception. Your own writes can go into the same transaction.
with conn, conn.cursor() as cur:
    order = {"order": 1001, "customer": "c-42", "amount": 19.5}
    # enqueue_item returns (id, part, duplicate); enqueue() just the id.
    cur.execute(
        sql.SQL("SELECT * FROM {}.enqueue_item(%s, %s, key => %s, dedup_key => %s)").format(schema),
        (queue, json.dumps(order), order["customer"], "order-1001"),
    )
    item, part, duplicate = cur.fetchone()
    print(f"item {item} part {part} duplicate {str(duplicate).lower()}")
    # The same dedup key while that item is live: the same item.
    cur.execute(
        sql.SQL("SELECT * FROM {}.enqueue_item(%s, %s, key => %s, dedup_key => %s)").format(schema),
        (queue, json.dumps(order), order["customer"], "order-1001"),
    )
    item, part, duplicate = cur.fetchone()
    print(f"item {item} part {part} duplicate {str(duplicate).lower()}")
    # bytes go as bytea, untouched; priority and delay are optional too.
    cur.execute(
        sql.SQL("SELECT {}.enqueue(%s, %s, priority => %s, delay => %s)").format(schema),
        (queue, b"\x00\xffraw", -1, "5 minutes"),
    )
    print(f"bytes item {cur.fetchone()[0]}")
    # Many at once: enqueue_many takes a list of payloads (and, optionally, one
    # key and one dedup key per payload, None for none), one call for the lot.
    orders = [{"order": n} for n in (1002, 1003, 1004)]
    cur.execute(
        sql.SQL("SELECT id FROM {}.enqueue_many(%s, %s::text[], keys => %s::text[])").format(schema),
        (queue, [json.dumps(o) for o in orders], ["c-7", None, "c-7"]),
    )
    print("many items " + " ".join(str(row[0]) for row in cur.fetchall()))

# A transaction that rolls back leaves no item behind.
try:
    with conn, conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT {}.enqueue(%s, %s)").format(schema), (queue, "never"))
        raise RuntimeError("changed my mind")
except RuntimeError:
    print("rolled back")

# Errors are PostgreSQL errors: SQLSTATE 42704 for an unknown queue, 22023 for a
# bad argument, 40001 (retry) for a conflict.
try:
    with conn, conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT {}.enqueue(%s, %s)").format(schema), ("no-such-queue", "x"))
except psycopg2.Error as e:
    print(f"error {e.pgcode}: {e.diag.message_primary}")

with conn, conn.cursor() as cur:
    cur.execute(
        sql.SQL("SELECT state, attempts FROM {}.item_state(%s, %s)").format(schema), (queue, item)
    )
    state, attempts = cur.fetchone()
    print(f"item {item} is {state}")
conn.close()
