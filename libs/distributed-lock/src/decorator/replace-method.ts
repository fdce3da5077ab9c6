/**
 * Puts `wrapped` in `method`'s place on `descriptor`, keeping what other
 * decorators stored on the function itself (route, guard, interceptor,
 * Swagger and schedule metadata: without this copy a route would silently
 * vanish), its name, and `metadata` under `metadataKey` for discovery.
 */
export function replaceMethod<T>(
  descriptor: TypedPropertyDescriptor<T>,
  method: (...args: unknown[]) => unknown,
  wrapped: (...args: unknown[]) => unknown,
  metadataKey: string | symbol,
  metadata: unknown,
): TypedPropertyDescriptor<T> {
  for (const key of Reflect.getOwnMetadataKeys(method))
    Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, method), wrapped);
  Reflect.defineMetadata(metadataKey, metadata, wrapped);
  Object.defineProperty(wrapped, 'name', { value: method.name });
  descriptor.value = wrapped as T;
  return descriptor;
}
