-- The local stack's two database roles (deploy/README.md, "Database roles"). `portal`, the
-- image's POSTGRES_USER, owns the tables: the migrate service connects as it, and each migration
-- grants `portal_app` ordinary reads and writes but, on the audit trail, only INSERT and
-- SELECT. web, worker and beat connect as `portal_app`. The image runs this once, when the data
-- volume is empty; on an older volume run it with psql, or start afresh with `down -v`.
CREATE ROLE portal_app LOGIN PASSWORD 'portal-app-local-only';
REVOKE ALL ON DATABASE portal FROM PUBLIC;
GRANT CONNECT ON DATABASE portal TO portal_app;
