-- Migration 11: queues.paused: a paused queue's workers claim nothing (partq queue pause)

ALTER TABLE {schema}.queues ADD COLUMN paused boolean NOT NULL DEFAULT false;
