import { defineHttpLockSuite } from './suites/index.js';

defineHttpLockSuite('fastify');
