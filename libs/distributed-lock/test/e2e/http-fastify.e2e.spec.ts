import { defineHttpLockSuite } from './http-fixtures.js';

defineHttpLockSuite('fastify');
