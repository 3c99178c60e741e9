-- Tables of the support platform.

CREATE TABLE customers (
    id          bigserial PRIMARY KEY,
    email       text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE conversations (
    id           bigserial PRIMARY KEY,
    customer_id  bigint NOT NULL REFERENCES customers (id),
    agent_name   text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    closed_at    timestamptz
);

CREATE TABLE messages (
    id               bigserial PRIMARY KEY,
    conversation_id  bigint NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    role             text NOT NULL CHECK (role IN ('user', 'agent', 'tool')),
    body             text NOT NULL,
    sent_at          timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX messages_conversation ON messages (conversation_id, sent_at);
