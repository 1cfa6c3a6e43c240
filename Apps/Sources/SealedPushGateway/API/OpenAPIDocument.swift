// GENERATED from API/openapi.json by Apps/Scripts/generate-openapi-swift.py (`make openapi`): do not edit by hand.

/// The gateway's OpenAPI 3.1 document, served at `GET /openapi.json`.
enum OpenAPIDocument {
    /// The document's text, byte for byte as `openapi.json`.
    static let json = ##"""
{
  "openapi": "3.1.0",
  "info": {
    "title": "SealedPush gateway",
    "version": "1",
    "description": "The HTTP API of the SealedPush push gateway on its listen address (gateway v1 sections 2-6). Every 4xx and 5xx answer is application/problem+json (RFC 9457). Admin routes (/healthz, /readyz, /metrics) are served on admin_listen and are not part of this document."
  },
  "security": [
    {
      "bearerAuth": []
    }
  ],
  "paths": {
    "/v1/apps/{app}/devices/{device_id}": {
      "parameters": [
        {
          "$ref": "#/components/parameters/App"
        },
        {
          "$ref": "#/components/parameters/DeviceId"
        }
      ],
      "put": {
        "operationId": "registerDevice",
        "summary": "Register or replace a device",
        "description": "Scope: devices.",
        "requestBody": {
          "required": true,
          "content": {
            "application/json": {
              "schema": {
                "$ref": "#/components/schemas/DeviceRegistration"
              },
              "examples": {
                "apns": {
                  "summary": "An iPhone",
                  "value": {
                    "user_id": "u-42",
                    "apns_token": "5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f",
                    "environment": "sandbox",
                    "key_record": {
                      "type": "sealedpush-device-key",
                      "version": 1,
                      "key_id": "15b689321abfea25",
                      "public_key": "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=",
                      "created_at": "2026-11-21T12:00:00Z"
                    }
                  }
                },
                "fcm": {
                  "summary": "An Android phone",
                  "value": {
                    "user_id": "u-42",
                    "platform": "fcm",
                    "fcm_token": "dQw4w9WgXcQ:APA91bH_example-registration-token",
                    "key_record": {
                      "type": "sealedpush-device-key",
                      "version": 1,
                      "key_id": "15b689321abfea25",
                      "public_key": "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=",
                      "created_at": "2026-11-21T12:00:00Z"
                    }
                  }
                },
                "webpush": {
                  "summary": "A browser",
                  "value": {
                    "user_id": "u-42",
                    "platform": "webpush",
                    "webpush": {
                      "endpoint": "https://push.example.net/wpush/v2/gAAAAABexample",
                      "keys": {
                        "p256dh": "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
                        "auth": "BTBZMqHH6r4Tts7J_aSIgg"
                      }
                    },
                    "key_record": {
                      "type": "sealedpush-device-key",
                      "version": 1,
                      "key_id": "15b689321abfea25",
                      "public_key": "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=",
                      "created_at": "2026-11-21T12:00:00Z"
                    }
                  }
                }
              }
            }
          }
        },
        "responses": {
          "200": {
            "description": "Replaced.",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              },
              "RateLimit-Limit": {
                "$ref": "#/components/headers/RateLimit-Limit"
              },
              "RateLimit-Remaining": {
                "$ref": "#/components/headers/RateLimit-Remaining"
              },
              "RateLimit-Reset": {
                "$ref": "#/components/headers/RateLimit-Reset"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Device"
                }
              }
            }
          },
          "201": {
            "description": "Created.",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              },
              "RateLimit-Limit": {
                "$ref": "#/components/headers/RateLimit-Limit"
              },
              "RateLimit-Remaining": {
                "$ref": "#/components/headers/RateLimit-Remaining"
              },
              "RateLimit-Reset": {
                "$ref": "#/components/headers/RateLimit-Reset"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Device"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/BadRequest"
          },
          "401": {
            "$ref": "#/components/responses/Unauthorized"
          },
          "403": {
            "$ref": "#/components/responses/Forbidden"
          },
          "409": {
            "$ref": "#/components/responses/TooManyDevices"
          },
          "413": {
            "$ref": "#/components/responses/TooLarge"
          },
          "415": {
            "$ref": "#/components/responses/UnsupportedMediaType"
          },
          "422": {
            "$ref": "#/components/responses/PlatformNotConfigured"
          },
          "429": {
            "$ref": "#/components/responses/RateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/Unavailable"
          }
        }
      },
      "get": {
        "operationId": "getDevice",
        "summary": "Read a device",
        "description": "Scope: devices or read.",
        "responses": {
          "200": {
            "description": "The device.",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              },
              "RateLimit-Limit": {
                "$ref": "#/components/headers/RateLimit-Limit"
              },
              "RateLimit-Remaining": {
                "$ref": "#/components/headers/RateLimit-Remaining"
              },
              "RateLimit-Reset": {
                "$ref": "#/components/headers/RateLimit-Reset"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Device"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/BadRequest"
          },
          "401": {
            "$ref": "#/components/responses/Unauthorized"
          },
          "403": {
            "$ref": "#/components/responses/Forbidden"
          },
          "404": {
            "$ref": "#/components/responses/NotFound"
          },
          "429": {
            "$ref": "#/components/responses/RateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/Unavailable"
          }
        }
      },
      "delete": {
        "operationId": "deleteDevice",
        "summary": "Delete a device; its deliveries not yet sent end cancelled",
        "description": "Scope: devices.",
        "responses": {
          "204": {
            "$ref": "#/components/responses/NoContent"
          },
          "400": {
            "$ref": "#/components/responses/BadRequest"
          },
          "401": {
            "$ref": "#/components/responses/Unauthorized"
          },
          "403": {
            "$ref": "#/components/responses/Forbidden"
          },
          "404": {
            "$ref": "#/components/responses/NotFound"
          },
          "429": {
            "$ref": "#/components/responses/RateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/Unavailable"
          }
        }
      }
    },
    "/v1/apps/{app}/users/{user_id}/devices": {
      "parameters": [
        {
          "$ref": "#/components/parameters/App"
        },
        {
          "$ref": "#/components/parameters/UserId"
        }
      ],
      "get": {
        "operationId": "listUserDevices",
        "summary": "A user's devices",
        "description": "Scope: devices or read.",
        "responses": {
          "200": {
            "description": "The user's devices (possibly none).",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              },
              "RateLimit-Limit": {
                "$ref": "#/components/headers/RateLimit-Limit"
              },
              "RateLimit-Remaining": {
                "$ref": "#/components/headers/RateLimit-Remaining"
              },
              "RateLimit-Reset": {
                "$ref": "#/components/headers/RateLimit-Reset"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/DeviceList"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/BadRequest"
          },
          "401": {
            "$ref": "#/components/responses/Unauthorized"
          },
          "403": {
            "$ref": "#/components/responses/Forbidden"
          },
          "404": {
            "$ref": "#/components/responses/NotFound"
          },
          "429": {
            "$ref": "#/components/responses/RateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/Unavailable"
          }
        }
      },
      "delete": {
        "operationId": "deleteUserDevices",
        "summary": "Delete every device of a user",
        "description": "Scope: devices.",
        "responses": {
          "204": {
            "$ref": "#/components/responses/NoContent"
          },
          "400": {
            "$ref": "#/components/responses/BadRequest"
          },
          "401": {
            "$ref": "#/components/responses/Unauthorized"
          },
          "403": {
            "$ref": "#/components/responses/Forbidden"
          },
          "404": {
            "$ref": "#/components/responses/NotFound"
          },
          "429": {
            "$ref": "#/components/responses/RateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/Unavailable"
          }
        }
      }
    },
    "/v1/apps/{app}/devices": {
      "parameters": [
        {
          "$ref": "#/components/parameters/App"
        }
      ],
      "get": {
        "operationId": "listDevices",
        "summary": "List devices by (updated_at, device_id)",
        "description": "Scope: devices or read.",
        "parameters": [
          {
            "name": "state",
            "in": "query",
            "required": false,
            "schema": {
              "type": "string",
              "enum": [
                "active",
                "unregistered"
              ]
            }
          },
          {
            "name": "since",
            "in": "query",
            "required": false,
            "description": "Inclusive lower bound on updated_at: RFC 3339 UTC with a Z, e.g. 2026-11-23T20:57:27.123Z.",
            "schema": {
              "type": "string",
              "format": "date-time",
              "pattern": "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?Z$"
            }
          },
          {
            "name": "limit",
            "in": "query",
            "required": false,
            "schema": {
              "type": "integer",
              "minimum": 1,
              "maximum": 1000,
              "default": 100
            }
          },
          {
            "name": "cursor",
            "in": "query",
            "required": false,
            "description": "next_cursor of the previous page: the position of that page's last device, <updated_at in Unix milliseconds>.<device_id>. Any cursor of this form is a position to list after; another value is 400 (cursors of earlier versions, base64url, are still read).",
            "schema": {
              "type": "string",
              "pattern": "^[0-9]{1,16}\\.[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$",
              "maxLength": 145
            }
          }
        ],
        "responses": {
          "200": {
            "description": "A page of devices.",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              },
              "RateLimit-Limit": {
                "$ref": "#/components/headers/RateLimit-Limit"
              },
              "RateLimit-Remaining": {
                "$ref": "#/components/headers/RateLimit-Remaining"
              },
              "RateLimit-Reset": {
                "$ref": "#/components/headers/RateLimit-Reset"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/DevicePage"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/BadRequest"
          },
          "401": {
            "$ref": "#/components/responses/Unauthorized"
          },
          "403": {
            "$ref": "#/components/responses/Forbidden"
          },
          "429": {
            "$ref": "#/components/responses/RateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/Unavailable"
          }
        }
      }
    },
    "/v1/apps/{app}/messages": {
      "parameters": [
        {
          "$ref": "#/components/parameters/App"
        }
      ],
      "post": {
        "operationId": "sendMessage",
        "summary": "Seal and queue a message for every device of its recipients",
        "description": "Scope: send.",
        "parameters": [
          {
            "name": "Idempotency-Key",
            "in": "header",
            "required": false,
            "description": "1-255 printable ASCII characters; per app, kept 24 hours.",
            "schema": {
              "type": "string",
              "minLength": 1,
              "maxLength": 255,
              "pattern": "^[\\x21-\\x7e]([\\x20-\\x7e]*[\\x21-\\x7e])?$"
            }
          }
        ],
        "requestBody": {
          "required": true,
          "content": {
            "application/json": {
              "schema": {
                "$ref": "#/components/schemas/MessageRequest"
              },
              "example": {
                "to": {
                  "user_id": "u-42"
                },
                "title": "Agent K",
                "body": "The eagle lands at noon.",
                "ttl": 60
              }
            }
          }
        },
        "responses": {
          "202": {
            "description": "Queued (or, with Idempotent-Replayed, the first answer again).",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              },
              "RateLimit-Limit": {
                "$ref": "#/components/headers/RateLimit-Limit"
              },
              "RateLimit-Remaining": {
                "$ref": "#/components/headers/RateLimit-Remaining"
              },
              "RateLimit-Reset": {
                "$ref": "#/components/headers/RateLimit-Reset"
              },
              "Idempotent-Replayed": {
                "$ref": "#/components/headers/Idempotent-Replayed"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/MessageAccepted"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/SendBadRequest"
          },
          "401": {
            "$ref": "#/components/responses/Unauthorized"
          },
          "403": {
            "$ref": "#/components/responses/Forbidden"
          },
          "404": {
            "$ref": "#/components/responses/SendNotFound"
          },
          "409": {
            "$ref": "#/components/responses/SendInProgress"
          },
          "413": {
            "$ref": "#/components/responses/SendTooLarge"
          },
          "415": {
            "$ref": "#/components/responses/UnsupportedMediaType"
          },
          "422": {
            "$ref": "#/components/responses/IdempotencyConflict"
          },
          "429": {
            "$ref": "#/components/responses/RateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/Unavailable"
          }
        }
      }
    },
    "/v1/apps/{app}/messages/batch": {
      "parameters": [
        {
          "$ref": "#/components/parameters/App"
        }
      ],
      "post": {
        "operationId": "sendMessages",
        "summary": "Seal and queue many messages in one request (gateway v1 section 5.1)",
        "description": "Scope: send. 1 to 500 messages, a body of at most 4 MiB. Each message is handled exactly as POST .../messages handles it alone (its own checks, idempotency_key and replay, one token of the rate limit) and answered in results, in request order; a result is 202 only once its deliveries are durable. No Idempotency-Key header: keys belong to messages.",
        "requestBody": {
          "required": true,
          "content": {
            "application/json": {
              "schema": {
                "$ref": "#/components/schemas/BatchRequest"
              },
              "example": {
                "messages": [
                  {
                    "to": {
                      "user_id": "u-42"
                    },
                    "body": "The eagle lands at noon.",
                    "idempotency_key": "order-17"
                  },
                  {
                    "to": {
                      "user_id": "u-43"
                    },
                    "body": "Bring the map."
                  }
                ]
              }
            }
          }
        },
        "responses": {
          "200": {
            "description": "Each message's answer, in request order.",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              },
              "RateLimit-Limit": {
                "$ref": "#/components/headers/RateLimit-Limit"
              },
              "RateLimit-Remaining": {
                "$ref": "#/components/headers/RateLimit-Remaining"
              },
              "RateLimit-Reset": {
                "$ref": "#/components/headers/RateLimit-Reset"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/BatchResponse"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/BadRequest"
          },
          "401": {
            "$ref": "#/components/responses/Unauthorized"
          },
          "403": {
            "$ref": "#/components/responses/Forbidden"
          },
          "413": {
            "$ref": "#/components/responses/TooLarge"
          },
          "415": {
            "$ref": "#/components/responses/UnsupportedMediaType"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/Unavailable"
          }
        }
      }
    },
    "/v1/apps/{app}/messages/{message_id}": {
      "parameters": [
        {
          "$ref": "#/components/parameters/App"
        },
        {
          "$ref": "#/components/parameters/MessageId"
        }
      ],
      "get": {
        "operationId": "getMessage",
        "summary": "A message and its deliveries",
        "description": "Scope: send or read.",
        "responses": {
          "200": {
            "description": "The message.",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              },
              "RateLimit-Limit": {
                "$ref": "#/components/headers/RateLimit-Limit"
              },
              "RateLimit-Remaining": {
                "$ref": "#/components/headers/RateLimit-Remaining"
              },
              "RateLimit-Reset": {
                "$ref": "#/components/headers/RateLimit-Reset"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Message"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/BadRequest"
          },
          "401": {
            "$ref": "#/components/responses/Unauthorized"
          },
          "403": {
            "$ref": "#/components/responses/Forbidden"
          },
          "404": {
            "$ref": "#/components/responses/NotFound"
          },
          "429": {
            "$ref": "#/components/responses/RateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/Unavailable"
          }
        }
      },
      "delete": {
        "operationId": "deleteMessage",
        "summary": "Delete a message; its deliveries not yet sent end cancelled",
        "description": "Scope: send.",
        "responses": {
          "200": {
            "description": "With retract=shown: each mailbox delivery retracted, and whether a retraction push was queued for it.",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "type": "object",
                  "required": [
                    "deliveries"
                  ],
                  "properties": {
                    "deliveries": {
                      "type": "array",
                      "items": {
                        "type": "object",
                        "required": [
                          "delivery_id",
                          "retraction"
                        ],
                        "properties": {
                          "delivery_id": {
                            "type": "string"
                          },
                          "retraction": {
                            "type": "string",
                            "enum": [
                              "sent",
                              "not_needed"
                            ]
                          }
                        },
                        "additionalProperties": false
                      }
                    }
                  },
                  "additionalProperties": false
                }
              }
            }
          },
          "204": {
            "$ref": "#/components/responses/NoContent"
          },
          "400": {
            "$ref": "#/components/responses/BadRequest"
          },
          "401": {
            "$ref": "#/components/responses/Unauthorized"
          },
          "403": {
            "$ref": "#/components/responses/Forbidden"
          },
          "404": {
            "$ref": "#/components/responses/NotFound"
          },
          "429": {
            "$ref": "#/components/responses/RateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/Unavailable"
          }
        },
        "parameters": [
          {
            "name": "retract",
            "in": "query",
            "required": false,
            "schema": {
              "type": "string",
              "enum": [
                "shown"
              ]
            },
            "description": "Mailbox v1 section 6: also send a retraction push for each retracted mailbox delivery whose push was accepted, under the same collapse id; the answer is then 200 listing each retracted delivery."
          }
        ]
      }
    },
    "/v1/receipts": {
      "post": {
        "operationId": "postReceipt",
        "summary": "A device's receipt (receipts v1 section 2); no bearer key",
        "security": [],
        "requestBody": {
          "required": true,
          "content": {
            "application/json": {
              "schema": {
                "$ref": "#/components/schemas/Receipt"
              },
              "example": {
                "v": 1,
                "type": "delivered",
                "id": "019abc0f1d2eAAAAAAAAAAAAAA",
                "token": "AAAAAAAAAAAAAAAAAAAAAA",
                "at": 1795000000
              }
            }
          }
        },
        "responses": {
          "204": {
            "description": "The receipt matches its delivery (repeats too).",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/PublicBadRequest"
          },
          "403": {
            "description": "The token does not match the message's.",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              }
            },
            "content": {
              "application/problem+json": {
                "schema": {
                  "$ref": "#/components/schemas/Problem403"
                }
              }
            }
          },
          "404": {
            "description": "No message with this id.",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              }
            },
            "content": {
              "application/problem+json": {
                "schema": {
                  "$ref": "#/components/schemas/Problem404"
                }
              }
            }
          },
          "413": {
            "$ref": "#/components/responses/PublicTooLarge"
          },
          "429": {
            "$ref": "#/components/responses/PublicRateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/PublicUnavailable"
          }
        }
      }
    },
    "/v1/reports": {
      "post": {
        "operationId": "postReport",
        "summary": "A device's failure report (receipts v1 section 3); no bearer key, never trusted as proof",
        "security": [],
        "requestBody": {
          "required": true,
          "content": {
            "application/json": {
              "schema": {
                "$ref": "#/components/schemas/FailureReport"
              },
              "example": {
                "v": 1,
                "type": "failed",
                "reason": "unknownKey",
                "kid": "15b689321abfea25",
                "at": 1795000000,
                "count": 1
              }
            }
          }
        },
        "responses": {
          "202": {
            "description": "Counted.",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/PublicBadRequest"
          },
          "413": {
            "$ref": "#/components/responses/PublicTooLarge"
          },
          "429": {
            "$ref": "#/components/responses/PublicRateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/PublicUnavailable"
          }
        },
        "parameters": [
          {
            "name": "app",
            "in": "query",
            "required": false,
            "schema": {
              "type": "string"
            },
            "description": "The app whose devices the report is about (a device's report URL names it). A report counts only in that app; without it, or for an unknown app, it is answered 202 and counted as app \"unknown\", and changes no device."
          }
        ]
      }
    },
    "/openapi.json": {
      "get": {
        "operationId": "getOpenAPI",
        "summary": "This document",
        "security": [],
        "responses": {
          "200": {
            "description": "The OpenAPI document.",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "type": "object"
                }
              }
            }
          }
        }
      }
    },
    "/v1/apps/{app}/events": {
      "parameters": [
        {
          "$ref": "#/components/parameters/App"
        }
      ],
      "get": {
        "operationId": "listEvents",
        "summary": "List the app's webhook events of the last 7 days, in order (gateway v1 section 8)",
        "description": "Scope: read. A receiver that was down catches up by listing from the last event id it handled. Events are listed for every app, with or without a webhook.",
        "parameters": [
          {
            "name": "after",
            "in": "query",
            "required": false,
            "description": "An event id from an earlier listing or webhook: list the events written after it. An id of this form that names no event of the app kept now (events are kept 7 days) is 410 event_not_kept; any other value is 400.",
            "schema": {
              "type": "string",
              "pattern": "^evt_[0-9a-f]{32}$"
            }
          },
          {
            "name": "limit",
            "in": "query",
            "required": false,
            "schema": {
              "type": "integer",
              "minimum": 1,
              "maximum": 1000,
              "default": 100
            }
          }
        ],
        "responses": {
          "200": {
            "description": "Events of the last 7 days after `after`, in the order they were written, each exactly as POSTed to the webhook.",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              },
              "RateLimit-Limit": {
                "$ref": "#/components/headers/RateLimit-Limit"
              },
              "RateLimit-Remaining": {
                "$ref": "#/components/headers/RateLimit-Remaining"
              },
              "RateLimit-Reset": {
                "$ref": "#/components/headers/RateLimit-Reset"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/EventList"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/BadRequest"
          },
          "401": {
            "$ref": "#/components/responses/Unauthorized"
          },
          "403": {
            "$ref": "#/components/responses/Forbidden"
          },
          "410": {
            "$ref": "#/components/responses/EventNotKept"
          },
          "429": {
            "$ref": "#/components/responses/RateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/Unavailable"
          }
        }
      }
    },
    "/v1/mailbox/fetch": {
      "post": {
        "operationId": "fetchMailbox",
        "summary": "A mailbox message by its handle, once (mailbox v1 section 3); no bearer key, body at most 1 KiB",
        "security": [],
        "requestBody": {
          "required": true,
          "content": {
            "application/json": {
              "schema": {
                "$ref": "#/components/schemas/MailboxFetchRequest"
              }
            }
          }
        },
        "responses": {
          "200": {
            "description": "The sealed envelope: the delivery waits, or was first fetched less than fetch_grace ago and its receipt has not arrived.",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              },
              "Cache-Control": {
                "schema": {
                  "type": "string",
                  "const": "no-store"
                }
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/MailboxEnvelope"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/PublicBadRequest"
          },
          "404": {
            "description": "One answer for every wrong handle: no such delivery, a wrong token, a malformed handle (unknown_handle).",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              }
            },
            "content": {
              "application/problem+json": {
                "schema": {
                  "$ref": "#/components/schemas/Problem404"
                }
              }
            }
          },
          "410": {
            "description": "Gone: collected, retracted or expired (reason).",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              }
            },
            "content": {
              "application/problem+json": {
                "schema": {
                  "$ref": "#/components/schemas/Problem410"
                }
              }
            }
          },
          "413": {
            "$ref": "#/components/responses/PublicTooLarge"
          },
          "415": {
            "$ref": "#/components/responses/UnsupportedMediaType"
          },
          "429": {
            "$ref": "#/components/responses/PublicRateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/PublicUnavailable"
          }
        }
      }
    },
    "/v1/mailbox/challenge": {
      "post": {
        "operationId": "challengeMailbox",
        "summary": "A challenge sealed to the device's key, to ask for the list (mailbox v1 section 7); no bearer key",
        "security": [],
        "requestBody": {
          "required": true,
          "content": {
            "application/json": {
              "schema": {
                "$ref": "#/components/schemas/MailboxChallengeRequest"
              }
            }
          }
        },
        "responses": {
          "200": {
            "description": "The challenge; an unknown app or device gets one all the same (sealed to a random key).",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              },
              "Cache-Control": {
                "schema": {
                  "type": "string",
                  "const": "no-store"
                }
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/MailboxChallenge"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/PublicBadRequest"
          },
          "413": {
            "$ref": "#/components/responses/PublicTooLarge"
          },
          "415": {
            "$ref": "#/components/responses/UnsupportedMediaType"
          },
          "429": {
            "$ref": "#/components/responses/PublicRateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/PublicUnavailable"
          }
        }
      }
    },
    "/v1/mailbox/list": {
      "post": {
        "operationId": "listMailbox",
        "summary": "The device's waiting mailbox deliveries with fresh handles (mailbox v1 section 7); no bearer key",
        "security": [],
        "requestBody": {
          "required": true,
          "content": {
            "application/json": {
              "schema": {
                "$ref": "#/components/schemas/MailboxListRequest"
              }
            }
          }
        },
        "responses": {
          "200": {
            "description": "Oldest first, at most 100; each handle is new (the old token no longer fetches).",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              },
              "Cache-Control": {
                "schema": {
                  "type": "string",
                  "const": "no-store"
                }
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/MailboxList"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/PublicBadRequest"
          },
          "403": {
            "description": "The challenge is unknown, expired, already answered, or the answer is wrong (wrong_answer).",
            "headers": {
              "Request-Id": {
                "$ref": "#/components/headers/Request-Id"
              }
            },
            "content": {
              "application/problem+json": {
                "schema": {
                  "$ref": "#/components/schemas/Problem403"
                }
              }
            }
          },
          "413": {
            "$ref": "#/components/responses/PublicTooLarge"
          },
          "415": {
            "$ref": "#/components/responses/UnsupportedMediaType"
          },
          "429": {
            "$ref": "#/components/responses/PublicRateLimited"
          },
          "500": {
            "$ref": "#/components/responses/Internal"
          },
          "503": {
            "$ref": "#/components/responses/PublicUnavailable"
          }
        }
      }
    }
  },
  "components": {
    "securitySchemes": {
      "bearerAuth": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key of the app in the path (sp_...)."
      }
    },
    "parameters": {
      "App": {
        "name": "app",
        "in": "path",
        "required": true,
        "schema": {
          "type": "string",
          "pattern": "^[a-z0-9][a-z0-9._-]{0,63}$"
        },
        "description": "The app id ([a-z0-9][a-z0-9._-]{0,63}); a key of another app gets 403 whatever the value."
      },
      "DeviceId": {
        "name": "device_id",
        "in": "path",
        "required": true,
        "schema": {
          "type": "string",
          "minLength": 1,
          "maxLength": 128,
          "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
        },
        "example": "phone-1",
        "description": "1-128 bytes of [A-Za-z0-9._:@-], starting with a letter or digit. Any other value is 400 invalid_field on every method; a well-formed id that names nothing is 404."
      },
      "UserId": {
        "name": "user_id",
        "in": "path",
        "required": true,
        "schema": {
          "type": "string",
          "minLength": 1,
          "maxLength": 128,
          "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
        },
        "example": "u-42",
        "description": "1-128 bytes of [A-Za-z0-9._:@-], starting with a letter or digit. Any other value is 400 invalid_field on every method; a well-formed id that names nothing is 404."
      },
      "MessageId": {
        "name": "message_id",
        "in": "path",
        "required": true,
        "schema": {
          "type": "string",
          "minLength": 1,
          "maxLength": 64,
          "pattern": "^[A-Za-z0-9_-]{1,64}$"
        },
        "description": "A message id as POST .../messages answered it (1-64 bytes of [A-Za-z0-9_-]). Any other value is 400 invalid_field; a well-formed id that names nothing is 404.",
        "example": "019ac6f0c2a8Zx3f0GqTq1yAbw"
      }
    },
    "headers": {
      "Request-Id": {
        "description": "Identifies this request; also written to its log line.",
        "required": true,
        "schema": {
          "type": "string",
          "minLength": 1
        }
      },
      "RateLimit-Limit": {
        "description": "Requests per second this app may make.",
        "required": false,
        "schema": {
          "type": "integer",
          "minimum": 0
        }
      },
      "RateLimit-Remaining": {
        "description": "Requests left in the current window.",
        "required": false,
        "schema": {
          "type": "integer",
          "minimum": 0
        }
      },
      "RateLimit-Reset": {
        "description": "Seconds until the window resets.",
        "required": false,
        "schema": {
          "type": "integer",
          "minimum": 0
        }
      },
      "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "required": true,
        "schema": {
          "type": "integer",
          "minimum": 0
        }
      },
      "WWW-Authenticate": {
        "description": "Bearer.",
        "required": true,
        "schema": {
          "type": "string",
          "pattern": "^Bearer"
        }
      },
      "Idempotent-Replayed": {
        "description": "Present when this is the stored answer to an earlier request with the same Idempotency-Key and body.",
        "required": false,
        "schema": {
          "type": "string",
          "enum": [
            "true"
          ]
        }
      }
    },
    "schemas": {
      "Id": {
        "type": "string",
        "minLength": 1,
        "maxLength": 128,
        "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$",
        "description": "A device or user id: 1-128 bytes of [A-Za-z0-9._:@-], starting with a letter or digit."
      },
      "Time": {
        "type": "string",
        "format": "date-time",
        "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$",
        "description": "RFC 3339 UTC with milliseconds and a Z, e.g. 2026-11-23T20:57:27.123Z."
      },
      "NullableTime": {
        "type": [
          "string",
          "null"
        ],
        "format": "date-time",
        "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$",
        "description": "RFC 3339 UTC with milliseconds and a Z, e.g. 2026-11-23T20:57:27.123Z."
      },
      "Problem": {
        "type": "object",
        "description": "RFC 9457 problem details (gateway v1 section 3); detail never quotes a request value.",
        "required": [
          "type",
          "title",
          "status",
          "detail"
        ],
        "properties": {
          "type": {
            "type": "string",
            "pattern": "^urn:sealedpush:problem:[a-z_]+$"
          },
          "title": {
            "type": "string"
          },
          "status": {
            "type": "integer"
          },
          "detail": {
            "type": "string"
          },
          "field": {
            "type": "string",
            "description": "A JSON pointer to the member at fault."
          }
        },
        "additionalProperties": false
      },
      "Problem400": {
        "type": "object",
        "title": "Problem400",
        "description": "RFC 9457 problem details for 400: the request is malformed (invalid_json, invalid_field, unknown_member). A schema of its own, not an allOf over Problem, so that generated clients keep a model per status.",
        "required": [
          "type",
          "title",
          "status",
          "detail"
        ],
        "properties": {
          "type": {
            "type": "string",
            "enum": [
              "urn:sealedpush:problem:invalid_json",
              "urn:sealedpush:problem:invalid_field",
              "urn:sealedpush:problem:unknown_member"
            ]
          },
          "title": {
            "type": "string"
          },
          "status": {
            "type": "integer",
            "const": 400
          },
          "detail": {
            "type": "string"
          },
          "field": {
            "type": "string",
            "description": "A JSON pointer to the member at fault."
          }
        },
        "additionalProperties": false
      },
      "Problem401": {
        "type": "object",
        "title": "Problem401",
        "description": "RFC 9457 problem details for 401: no API key, or a key no app has (unauthorized). A schema of its own, not an allOf over Problem, so that generated clients keep a model per status.",
        "required": [
          "type",
          "title",
          "status",
          "detail"
        ],
        "properties": {
          "type": {
            "type": "string",
            "const": "urn:sealedpush:problem:unauthorized"
          },
          "title": {
            "type": "string"
          },
          "status": {
            "type": "integer",
            "const": 401
          },
          "detail": {
            "type": "string"
          },
          "field": {
            "type": "string",
            "description": "A JSON pointer to the member at fault."
          }
        },
        "additionalProperties": false
      },
      "Problem403": {
        "type": "object",
        "title": "Problem403",
        "description": "RFC 9457 problem details for 403: another app's key, a missing scope, or a receipt's token that does not match (forbidden). A schema of its own, not an allOf over Problem, so that generated clients keep a model per status.",
        "required": [
          "type",
          "title",
          "status",
          "detail"
        ],
        "properties": {
          "type": {
            "type": "string",
            "enum": [
              "urn:sealedpush:problem:forbidden",
              "urn:sealedpush:problem:wrong_answer"
            ]
          },
          "title": {
            "type": "string"
          },
          "status": {
            "type": "integer",
            "const": 403
          },
          "detail": {
            "type": "string"
          },
          "field": {
            "type": "string",
            "description": "A JSON pointer to the member at fault."
          }
        },
        "additionalProperties": false
      },
      "Problem404": {
        "type": "object",
        "title": "Problem404",
        "description": "RFC 9457 problem details for 404: no such device, message, never-registered user, route or receipt id (not_found). A schema of its own, not an allOf over Problem, so that generated clients keep a model per status.",
        "required": [
          "type",
          "title",
          "status",
          "detail"
        ],
        "properties": {
          "type": {
            "type": "string",
            "enum": [
              "urn:sealedpush:problem:not_found",
              "urn:sealedpush:problem:unknown_handle"
            ]
          },
          "title": {
            "type": "string"
          },
          "status": {
            "type": "integer",
            "const": 404
          },
          "detail": {
            "type": "string"
          },
          "field": {
            "type": "string",
            "description": "A JSON pointer to the member at fault."
          }
        },
        "additionalProperties": false
      },
      "Problem409": {
        "type": "object",
        "title": "Problem409",
        "description": "RFC 9457 problem details for 409: a user's device limit, or an Idempotency-Key still in flight (conflict). A schema of its own, not an allOf over Problem, so that generated clients keep a model per status.",
        "required": [
          "type",
          "title",
          "status",
          "detail"
        ],
        "properties": {
          "type": {
            "type": "string",
            "const": "urn:sealedpush:problem:conflict"
          },
          "title": {
            "type": "string"
          },
          "status": {
            "type": "integer",
            "const": 409
          },
          "detail": {
            "type": "string"
          },
          "field": {
            "type": "string",
            "description": "A JSON pointer to the member at fault."
          }
        },
        "additionalProperties": false
      },
      "Problem413": {
        "type": "object",
        "title": "Problem413",
        "description": "RFC 9457 problem details for 413: the body or the sealed message is too large (too_large). A schema of its own, not an allOf over Problem, so that generated clients keep a model per status.",
        "required": [
          "type",
          "title",
          "status",
          "detail"
        ],
        "properties": {
          "type": {
            "type": "string",
            "const": "urn:sealedpush:problem:too_large"
          },
          "title": {
            "type": "string"
          },
          "status": {
            "type": "integer",
            "const": 413
          },
          "detail": {
            "type": "string"
          },
          "field": {
            "type": "string",
            "description": "A JSON pointer to the member at fault."
          }
        },
        "additionalProperties": false
      },
      "Problem415": {
        "type": "object",
        "title": "Problem415",
        "description": "RFC 9457 problem details for 415: Content-Type is not application/json (unsupported_media_type). A schema of its own, not an allOf over Problem, so that generated clients keep a model per status.",
        "required": [
          "type",
          "title",
          "status",
          "detail"
        ],
        "properties": {
          "type": {
            "type": "string",
            "const": "urn:sealedpush:problem:unsupported_media_type"
          },
          "title": {
            "type": "string"
          },
          "status": {
            "type": "integer",
            "const": 415
          },
          "detail": {
            "type": "string"
          },
          "field": {
            "type": "string",
            "description": "A JSON pointer to the member at fault."
          }
        },
        "additionalProperties": false
      },
      "Problem422": {
        "type": "object",
        "title": "Problem422",
        "description": "RFC 9457 problem details for 422: an Idempotency-Key reused with another body, a fan-out over max_fanout, or a device of a platform the app does not serve (idempotency_conflict, too_many_deliveries, platform_not_configured). A schema of its own, not an allOf over Problem, so that generated clients keep a model per status.",
        "required": [
          "type",
          "title",
          "status",
          "detail"
        ],
        "properties": {
          "type": {
            "type": "string",
            "enum": [
              "urn:sealedpush:problem:idempotency_conflict",
              "urn:sealedpush:problem:too_many_deliveries",
              "urn:sealedpush:problem:platform_not_configured",
              "urn:sealedpush:problem:mailbox_disabled",
              "urn:sealedpush:problem:message_too_large"
            ]
          },
          "title": {
            "type": "string"
          },
          "status": {
            "type": "integer",
            "const": 422
          },
          "detail": {
            "type": "string"
          },
          "field": {
            "type": "string",
            "description": "A JSON pointer to the member at fault."
          }
        },
        "additionalProperties": false
      },
      "Problem429": {
        "type": "object",
        "title": "Problem429",
        "description": "RFC 9457 problem details for 429: a rate limit; see Retry-After (rate_limited). A schema of its own, not an allOf over Problem, so that generated clients keep a model per status.",
        "required": [
          "type",
          "title",
          "status",
          "detail"
        ],
        "properties": {
          "type": {
            "type": "string",
            "const": "urn:sealedpush:problem:rate_limited"
          },
          "title": {
            "type": "string"
          },
          "status": {
            "type": "integer",
            "const": 429
          },
          "detail": {
            "type": "string"
          },
          "field": {
            "type": "string",
            "description": "A JSON pointer to the member at fault."
          }
        },
        "additionalProperties": false
      },
      "Problem503": {
        "type": "object",
        "title": "Problem503",
        "description": "RFC 9457 problem details for 503: the queue is full, the gateway is stopping, or the database failed; see Retry-After (unavailable). A schema of its own, not an allOf over Problem, so that generated clients keep a model per status.",
        "required": [
          "type",
          "title",
          "status",
          "detail"
        ],
        "properties": {
          "type": {
            "type": "string",
            "const": "urn:sealedpush:problem:unavailable"
          },
          "title": {
            "type": "string"
          },
          "status": {
            "type": "integer",
            "const": 503
          },
          "detail": {
            "type": "string"
          },
          "field": {
            "type": "string",
            "description": "A JSON pointer to the member at fault."
          }
        },
        "additionalProperties": false
      },
      "KeyRecord": {
        "type": "object",
        "description": "The device's exported sealedpush-device-key record (wire format v1); key_id must be derived from public_key. Members this version does not know are kept.",
        "required": [
          "type",
          "version",
          "key_id",
          "public_key"
        ],
        "properties": {
          "type": {
            "const": "sealedpush-device-key"
          },
          "version": {
            "const": 1
          },
          "key_id": {
            "type": "string",
            "pattern": "^[0-9a-f]{16}$"
          },
          "public_key": {
            "type": "string",
            "description": "Standard base64 of the 32-byte X25519 public key.",
            "pattern": "^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$"
          },
          "created_at": {
            "type": "string",
            "format": "date-time",
            "pattern": "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$",
            "description": "RFC 3339: Z or a numeric offset (+00:00)."
          },
          "reveal": {
            "type": "object",
            "description": "The device's reveal key (reveal v1 section 1): reveal messages seal their text to it. reveal.key_id must be derived from reveal.public_key. A record without it cannot receive reveal messages.",
            "required": [
              "key_id",
              "public_key"
            ],
            "properties": {
              "key_id": {
                "type": "string",
                "pattern": "^[0-9a-f]{16}$"
              },
              "public_key": {
                "type": "string",
                "description": "Standard base64 of the 32-byte X25519 public key.",
                "pattern": "^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$"
              }
            }
          }
        },
        "additionalProperties": true
      },
      "DeviceRegistration": {
        "description": "A device of one platform (platforms v1 section 1): apns (the default), fcm or webpush, each with its own members and no other's. The app must serve the platform (its configuration has that section), else 422 platform_not_configured.",
        "oneOf": [
          {
            "$ref": "#/components/schemas/APNsDeviceRegistration"
          },
          {
            "$ref": "#/components/schemas/FCMDeviceRegistration"
          },
          {
            "$ref": "#/components/schemas/WebPushDeviceRegistration"
          }
        ]
      },
      "LastReport": {
        "type": "object",
        "description": "The latest failure report (receipts v1 section 3) whose key id matches the device's key.",
        "required": [
          "reason",
          "kid",
          "count",
          "at"
        ],
        "properties": {
          "reason": {
            "type": "string",
            "enum": [
              "malformedPayload",
              "unsupportedVersion",
              "unknownKey",
              "decryptionFailed",
              "badPadding",
              "malformedMessage",
              "recipientMismatch",
              "untrustedSender",
              "badSignature",
              "signatureRequired",
              "expired",
              "notYetValid",
              "keychainLocked"
            ]
          },
          "kid": {
            "type": [
              "string",
              "null"
            ],
            "pattern": "^[0-9a-f]{16}$"
          },
          "count": {
            "type": "integer",
            "minimum": 1
          },
          "at": {
            "$ref": "#/components/schemas/Time"
          }
        },
        "additionalProperties": false
      },
      "Device": {
        "type": "object",
        "required": [
          "device_id",
          "user_id",
          "platform",
          "key_id",
          "state",
          "created_at",
          "updated_at",
          "unregistered_at",
          "unregistered_reason",
          "token_reassigned",
          "reveal_key_id",
          "last_report"
        ],
        "properties": {
          "device_id": {
            "$ref": "#/components/schemas/Id"
          },
          "user_id": {
            "$ref": "#/components/schemas/Id"
          },
          "platform": {
            "type": "string",
            "enum": [
              "apns",
              "fcm",
              "webpush"
            ]
          },
          "environment": {
            "type": "string",
            "enum": [
              "production",
              "sandbox"
            ],
            "description": "apns only."
          },
          "key_id": {
            "type": "string",
            "pattern": "^[0-9a-f]{16}$"
          },
          "state": {
            "type": "string",
            "enum": [
              "active",
              "unregistered"
            ]
          },
          "apns_token_suffix": {
            "type": "string",
            "pattern": "^[0-9a-f]{8}$",
            "description": "apns only: the last 8 hex digits of the token."
          },
          "fcm_token_suffix": {
            "type": "string",
            "description": "fcm only: the last 8 characters of the registration token."
          },
          "webpush_origin": {
            "type": [
              "string",
              "null"
            ],
            "description": "webpush only: the endpoint's origin (the endpoint itself is never returned)."
          },
          "created_at": {
            "$ref": "#/components/schemas/Time"
          },
          "updated_at": {
            "$ref": "#/components/schemas/Time"
          },
          "unregistered_at": {
            "$ref": "#/components/schemas/NullableTime"
          },
          "unregistered_reason": {
            "type": [
              "string",
              "null"
            ]
          },
          "token_reassigned": {
            "type": "boolean"
          },
          "reveal_key_id": {
            "type": [
              "string",
              "null"
            ],
            "pattern": "^[0-9a-f]{16}$",
            "description": "The key id of the reveal key in the registered record (reveal v1 section 8); null when the record has none (reveal messages skip the device)."
          },
          "last_report": {
            "oneOf": [
              {
                "type": "null"
              },
              {
                "$ref": "#/components/schemas/LastReport"
              }
            ]
          }
        },
        "additionalProperties": false
      },
      "DeviceList": {
        "type": "object",
        "required": [
          "devices"
        ],
        "properties": {
          "devices": {
            "type": "array",
            "items": {
              "$ref": "#/components/schemas/Device"
            }
          }
        },
        "additionalProperties": false
      },
      "DevicePage": {
        "type": "object",
        "description": "Devices ordered by (updated_at, device_id).",
        "required": [
          "devices",
          "next_cursor"
        ],
        "properties": {
          "devices": {
            "type": "array",
            "items": {
              "$ref": "#/components/schemas/Device"
            }
          },
          "next_cursor": {
            "type": [
              "string",
              "null"
            ],
            "description": "Pass as cursor for the next page; null on the last page. Set whenever a page is full, so the last page may be empty.",
            "pattern": "^[0-9]{1,16}\\.[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
          }
        },
        "additionalProperties": false
      },
      "Recipients": {
        "oneOf": [
          {
            "type": "object",
            "required": [
              "user_id"
            ],
            "properties": {
              "user_id": {
                "$ref": "#/components/schemas/Id"
              }
            },
            "additionalProperties": false
          },
          {
            "type": "object",
            "required": [
              "user_ids"
            ],
            "properties": {
              "user_ids": {
                "type": "array",
                "minItems": 1,
                "maxItems": 1000,
                "items": {
                  "$ref": "#/components/schemas/Id"
                }
              }
            },
            "additionalProperties": false
          },
          {
            "type": "object",
            "required": [
              "device_ids"
            ],
            "properties": {
              "device_ids": {
                "type": "array",
                "minItems": 1,
                "maxItems": 1000,
                "items": {
                  "$ref": "#/components/schemas/Id"
                }
              }
            },
            "additionalProperties": false
          }
        ]
      },
      "MessageRequest": {
        "type": "object",
        "description": "title, subtitle, body, thread_id, category, badge, sound and data travel only inside the sealed body. A message that cannot fit 4096 bytes once sealed is 413 (detail gives the largest body that fits).",
        "required": [
          "to",
          "body"
        ],
        "properties": {
          "to": {
            "$ref": "#/components/schemas/Recipients"
          },
          "title": {
            "type": "string",
            "maxLength": 4096,
            "description": "At most 4096 characters (less fits once sealed: 413 gives the size that does)."
          },
          "subtitle": {
            "type": "string",
            "maxLength": 4096,
            "description": "At most 4096 characters (less fits once sealed: 413 gives the size that does)."
          },
          "body": {
            "type": "string",
            "maxLength": 4096
          },
          "thread_id": {
            "type": "string",
            "maxLength": 256,
            "description": "At most 256 characters."
          },
          "category": {
            "type": "string",
            "maxLength": 256,
            "description": "At most 256 characters."
          },
          "badge": {
            "type": "integer",
            "minimum": 0,
            "maximum": 2147483647
          },
          "sound": {
            "type": "string",
            "maxLength": 256,
            "description": "At most 256 characters."
          },
          "data": {
            "type": "object",
            "not": {
              "required": [
                "aps"
              ]
            },
            "description": "Opaque to the gateway; travels only inside the sealed body. May not hold aps."
          },
          "ttl": {
            "type": "integer",
            "minimum": 0,
            "maximum": 2592000,
            "default": 604800,
            "description": "Seconds APNs and the device keep the message; 0: deliver now or never."
          },
          "collapse_id": {
            "type": "string",
            "minLength": 1,
            "maxLength": 64,
            "pattern": "^[^\\x00-\\x1f\\x7f]+$",
            "description": "At most 64 bytes (UTF-8), no control characters."
          },
          "priority": {
            "type": "integer",
            "enum": [
              10,
              5
            ],
            "default": 10
          },
          "receipt": {
            "type": "boolean",
            "default": true
          },
          "reveal": {
            "type": "boolean",
            "default": false,
            "description": "A reveal message (reveal v1 sections 2 and 8): iOS is shown only a placeholder (Press and hold to read) and the text is sealed again to each device's reveal key, opened when the user presses and holds on an unlocked phone. Devices whose record has no reveal key are listed in skipped with reason no_reveal_key. Less text fits: a message too large is 413 with how many bytes of title, subtitle and body do."
          },
          "delivery": {
            "type": "string",
            "enum": [
              "push",
              "mailbox"
            ],
            "description": "How the message reaches its devices (mailbox v1 section 1): push (the sealed message rides in the push) or mailbox (the push carries only a handle, the device fetches the sealed message once from POST /v1/mailbox/fetch; up to the app's max_message_bytes). Without it, mailbox when the app has its mailbox enabled. mailbox for an app without it is 422 mailbox_disabled."
          }
        },
        "additionalProperties": false
      },
      "MessageAccepted": {
        "type": "object",
        "required": [
          "message_id",
          "created_at",
          "expires_at",
          "deliveries",
          "skipped"
        ],
        "properties": {
          "message_id": {
            "type": "string",
            "minLength": 1,
            "maxLength": 64
          },
          "created_at": {
            "$ref": "#/components/schemas/Time"
          },
          "expires_at": {
            "$ref": "#/components/schemas/Time"
          },
          "deliveries": {
            "type": "array",
            "items": {
              "type": "object",
              "required": [
                "delivery_id",
                "device_id",
                "state"
              ],
              "properties": {
                "delivery_id": {
                  "type": "string",
                  "minLength": 1
                },
                "device_id": {
                  "$ref": "#/components/schemas/Id"
                },
                "state": {
                  "const": "queued"
                },
                "delivery": {
                  "type": "string",
                  "enum": [
                    "push",
                    "mailbox"
                  ]
                }
              },
              "additionalProperties": false
            }
          },
          "skipped": {
            "type": "array",
            "items": {
              "type": "object",
              "required": [
                "device_id",
                "reason"
              ],
              "properties": {
                "device_id": {
                  "$ref": "#/components/schemas/Id"
                },
                "reason": {
                  "type": "string",
                  "enum": [
                    "unknown_device",
                    "unregistered",
                    "no_reveal_key",
                    "bad_key_record",
                    "platform_not_configured"
                  ]
                }
              },
              "additionalProperties": false
            }
          }
        },
        "additionalProperties": false
      },
      "Delivery": {
        "type": "object",
        "required": [
          "delivery_id",
          "device_id",
          "state",
          "attempts",
          "platform",
          "platform_id",
          "platform_status",
          "apns_id",
          "apns_status",
          "reason",
          "updated_at",
          "next_attempt_at",
          "accepted_at",
          "delivered_at",
          "revealed_at",
          "seq"
        ],
        "properties": {
          "delivery_id": {
            "type": "string",
            "minLength": 1
          },
          "device_id": {
            "$ref": "#/components/schemas/Id"
          },
          "state": {
            "type": "string",
            "enum": [
              "queued",
              "accepted",
              "fetched",
              "delivered",
              "rejected",
              "unregistered",
              "expired",
              "cancelled"
            ]
          },
          "attempts": {
            "type": "integer",
            "minimum": 0
          },
          "platform": {
            "type": "string",
            "enum": [
              "apns",
              "fcm",
              "webpush"
            ]
          },
          "platform_id": {
            "type": [
              "string",
              "null"
            ],
            "description": "The push service's id for the delivery: the apns-id once sent (apns), FCM's message name or the Web Push Location once accepted."
          },
          "platform_status": {
            "type": [
              "integer",
              "null"
            ],
            "description": "The push service's last HTTP status (equal to apns_status for apns)."
          },
          "apns_id": {
            "type": [
              "string",
              "null"
            ],
            "format": "uuid",
            "description": "apns only (null for the other platforms)."
          },
          "apns_status": {
            "type": [
              "integer",
              "null"
            ],
            "description": "apns only (null for the other platforms)."
          },
          "reason": {
            "type": [
              "string",
              "null"
            ],
            "description": "APNs's reason or a gateway reason (ttl_expired, token_reassigned, device_deleted, message_deleted, credentials_paused)."
          },
          "updated_at": {
            "$ref": "#/components/schemas/Time"
          },
          "next_attempt_at": {
            "$ref": "#/components/schemas/NullableTime"
          },
          "accepted_at": {
            "$ref": "#/components/schemas/NullableTime"
          },
          "delivered_at": {
            "$ref": "#/components/schemas/NullableTime"
          },
          "revealed_at": {
            "$ref": "#/components/schemas/NullableTime",
            "description": "When the device's revealed receipt arrived (reveal v1 section 8); null until then."
          },
          "seq": {
            "type": "integer",
            "minimum": 0,
            "description": "Grows with each change of the delivery."
          },
          "delivery": {
            "type": "string",
            "enum": [
              "push",
              "mailbox"
            ],
            "description": "The delivery's mode (mailbox v1 section 1); in GET .../messages/{message_id}."
          },
          "fetched_at": {
            "$ref": "#/components/schemas/NullableTime",
            "description": "When a mailbox delivery was first fetched (mailbox v1 section 3)."
          }
        },
        "additionalProperties": false
      },
      "Message": {
        "type": "object",
        "required": [
          "message_id",
          "created_at",
          "expires_at",
          "deliveries"
        ],
        "properties": {
          "message_id": {
            "type": "string",
            "minLength": 1,
            "maxLength": 64
          },
          "created_at": {
            "$ref": "#/components/schemas/Time"
          },
          "expires_at": {
            "$ref": "#/components/schemas/Time"
          },
          "deliveries": {
            "type": "array",
            "items": {
              "$ref": "#/components/schemas/Delivery"
            }
          }
        },
        "additionalProperties": false
      },
      "DeliveryEventData": {
        "type": "object",
        "required": [
          "message_id",
          "delivery"
        ],
        "properties": {
          "message_id": {
            "type": "string",
            "minLength": 1
          },
          "delivery": {
            "$ref": "#/components/schemas/Delivery"
          }
        },
        "additionalProperties": false
      },
      "Event": {
        "type": "object",
        "required": [
          "id",
          "type",
          "created_at",
          "app",
          "data"
        ],
        "properties": {
          "id": {
            "type": "string",
            "pattern": "^evt_[0-9a-f]{32}$",
            "description": "Unique: receivers deduplicate by it."
          },
          "type": {
            "type": "string",
            "enum": [
              "delivery.accepted",
              "delivery.fetched",
              "delivery.delivered",
              "delivery.rejected",
              "delivery.unregistered",
              "delivery.expired",
              "delivery.cancelled",
              "delivery.revealed",
              "device.unregistered"
            ]
          },
          "created_at": {
            "$ref": "#/components/schemas/Time"
          },
          "app": {
            "type": "string"
          },
          "data": {
            "description": "delivery.*: the message id and the delivery (its seq grows with each change); device.unregistered: the device.",
            "oneOf": [
              {
                "$ref": "#/components/schemas/DeliveryEventData"
              },
              {
                "$ref": "#/components/schemas/Device"
              }
            ]
          }
        },
        "additionalProperties": false
      },
      "EventList": {
        "type": "object",
        "required": [
          "events"
        ],
        "properties": {
          "events": {
            "type": "array",
            "items": {
              "$ref": "#/components/schemas/Event"
            }
          }
        },
        "additionalProperties": false
      },
      "Problem500": {
        "type": "object",
        "title": "Problem500",
        "description": "RFC 9457 problem details for 500: a fault of the gateway itself; the detail names the Request-Id (internal). A schema of its own, not an allOf over Problem, so that generated clients keep a model per status.",
        "required": [
          "type",
          "title",
          "status",
          "detail"
        ],
        "properties": {
          "type": {
            "type": "string",
            "const": "urn:sealedpush:problem:internal"
          },
          "title": {
            "type": "string"
          },
          "status": {
            "type": "integer",
            "const": 500
          },
          "detail": {
            "type": "string"
          },
          "field": {
            "type": "string",
            "description": "A JSON pointer to the member at fault."
          }
        },
        "additionalProperties": false
      },
      "ReceiptAttachments": {
        "type": "object",
        "description": "What became of the message's attachments (present only when it had some): how many were attached, and how many failed by reason. Devices send the attachment reasons of attachments v1 section 4; the gateway keeps no attachment counts, so counts that add up to more than 4 do not refuse the receipt.",
        "required": [
          "attached",
          "failed"
        ],
        "properties": {
          "attached": {
            "type": "integer",
            "minimum": 0,
            "maximum": 4
          },
          "failed": {
            "type": "object",
            "description": "Failed attachments by reason code (wire format and attachments v1 reason codes): each count 1 to 4.",
            "properties": {
              "malformedPayload": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "unsupportedVersion": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "unknownKey": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "decryptionFailed": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "badPadding": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "malformedMessage": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "recipientMismatch": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "untrustedSender": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "badSignature": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "signatureRequired": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "expired": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "notYetValid": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "replayed": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "keychainLocked": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "notEncrypted": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "notMutable": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "noAlert": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "payloadTooLarge": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "invalidPayload": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "extensionCrashed": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "timeExpired": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "alertRemoved": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "fetchFailed": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "handleMismatch": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "retracted": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "attachmentUnsupportedType": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "attachmentTooLarge": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "attachmentInsecureURL": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "attachmentUnavailable": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "attachmentCorrupt": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "attachmentTypeMismatch": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "attachmentStorageFailed": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              },
              "attachmentTimeExpired": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4
              }
            },
            "additionalProperties": false
          }
        },
        "additionalProperties": false
      },
      "Receipt": {
        "type": "object",
        "description": "A receipt (receipts v1 section 2): `delivered` once the message opened on the device, `revealed` once a reveal message was pressed and held (reveal v1 section 6; it also makes the delivery delivered). At most 4096 bytes; no title, body, key or device identifier.",
        "required": [
          "v",
          "type",
          "id",
          "token",
          "at"
        ],
        "properties": {
          "v": {
            "type": "integer",
            "const": 1
          },
          "type": {
            "type": "string",
            "enum": [
              "delivered",
              "revealed"
            ]
          },
          "id": {
            "type": "string",
            "minLength": 1,
            "maxLength": 64,
            "description": "The message id (the message_id this gateway answered: 1 to 64 of A-Z a-z 0-9 _ -). Any other id names no delivery: 404.",
            "pattern": "^[A-Za-z0-9_-]{1,64}$"
          },
          "token": {
            "type": "string",
            "pattern": "^(?:(?:[A-Za-z0-9_-]{4}){5}(?:[A-Za-z0-9_-][AQgw]|[A-Za-z0-9_-]{2}[AEIMQUYcgkosw048])|(?:[A-Za-z0-9_-]{4}){6,20}(?:[A-Za-z0-9_-][AQgw]|[A-Za-z0-9_-]{2}[AEIMQUYcgkosw048])?|(?:[A-Za-z0-9_-]{4}){21}(?:[A-Za-z0-9_-][AQgw])?)$",
            "description": "The message's receipt token: base64url without padding of 16 to 64 bytes, canonical (the unused bits of the last character zero). The gateway keeps only its SHA-256."
          },
          "at": {
            "type": "integer",
            "minimum": 0,
            "description": "The device's clock when it was made, Unix seconds.",
            "maximum": 9223372036854775807
          },
          "attachments": {
            "$ref": "#/components/schemas/ReceiptAttachments"
          },
          "dropped": {
            "type": "integer",
            "minimum": 1,
            "maximum": 2147483647,
            "description": "How many entries the device's outbox dropped before this one (receipts v1 section 2); absent when none."
          }
        },
        "additionalProperties": false
      },
      "FailureReport": {
        "type": "object",
        "description": "A failure report (receipts v1 section 3): a message sealed to `kid` could not be opened, `count` times since the last report for (reason, kid). Unauthenticated: a signal, never proof. At most 4096 bytes.",
        "required": [
          "v",
          "type",
          "reason",
          "kid",
          "at",
          "count"
        ],
        "properties": {
          "v": {
            "type": "integer",
            "const": 1
          },
          "type": {
            "type": "string",
            "const": "failed"
          },
          "reason": {
            "type": "string",
            "enum": [
              "malformedPayload",
              "unsupportedVersion",
              "unknownKey",
              "decryptionFailed",
              "badPadding",
              "malformedMessage",
              "recipientMismatch",
              "untrustedSender",
              "badSignature",
              "signatureRequired",
              "expired",
              "notYetValid",
              "keychainLocked"
            ],
            "description": "The wire-format v1 section 5 reason code (replayed is never reported)."
          },
          "kid": {
            "type": [
              "string",
              "null"
            ],
            "pattern": "^[0-9a-f]{16}$",
            "description": "The envelope's key id, 16 hex digits, or null when the envelope named none."
          },
          "at": {
            "type": "integer",
            "minimum": 0,
            "description": "The device's clock when it was made, Unix seconds.",
            "maximum": 9223372036854775807
          },
          "count": {
            "type": "integer",
            "minimum": 1,
            "maximum": 2147483647
          },
          "dropped": {
            "type": "integer",
            "minimum": 1,
            "maximum": 2147483647,
            "description": "How many entries the device's outbox dropped before this one (receipts v1 section 2); absent when none."
          }
        },
        "additionalProperties": false
      },
      "BatchMessage": {
        "type": "object",
        "description": "One message of a batch: a POST .../messages body, with its own optional idempotency key. title, subtitle, body, thread_id, category, badge, sound and data travel only inside the sealed body. A message that cannot fit 4096 bytes once sealed is 413 (detail gives the largest body that fits).",
        "required": [
          "to",
          "body"
        ],
        "properties": {
          "to": {
            "$ref": "#/components/schemas/Recipients"
          },
          "title": {
            "type": "string",
            "maxLength": 4096,
            "description": "At most 4096 characters (less fits once sealed: 413 gives the size that does)."
          },
          "subtitle": {
            "type": "string",
            "maxLength": 4096,
            "description": "At most 4096 characters (less fits once sealed: 413 gives the size that does)."
          },
          "body": {
            "type": "string",
            "maxLength": 4096
          },
          "thread_id": {
            "type": "string",
            "maxLength": 256,
            "description": "At most 256 characters."
          },
          "category": {
            "type": "string",
            "maxLength": 256,
            "description": "At most 256 characters."
          },
          "badge": {
            "type": "integer",
            "minimum": 0,
            "maximum": 2147483647
          },
          "sound": {
            "type": "string",
            "maxLength": 256,
            "description": "At most 256 characters."
          },
          "data": {
            "type": "object",
            "not": {
              "required": [
                "aps"
              ]
            },
            "description": "Opaque to the gateway; travels only inside the sealed body. May not hold aps."
          },
          "ttl": {
            "type": "integer",
            "minimum": 0,
            "maximum": 2592000,
            "default": 604800,
            "description": "Seconds APNs and the device keep the message; 0: deliver now or never."
          },
          "collapse_id": {
            "type": "string",
            "minLength": 1,
            "maxLength": 64,
            "pattern": "^[^\\x00-\\x1f\\x7f]+$",
            "description": "At most 64 bytes (UTF-8), no control characters."
          },
          "priority": {
            "type": "integer",
            "enum": [
              10,
              5
            ],
            "default": 10
          },
          "receipt": {
            "type": "boolean",
            "default": true
          },
          "reveal": {
            "type": "boolean",
            "default": false,
            "description": "A reveal message (reveal v1 sections 2 and 8): iOS is shown only a placeholder (Press and hold to read) and the text is sealed again to each device's reveal key, opened when the user presses and holds on an unlocked phone. Devices whose record has no reveal key are listed in skipped with reason no_reveal_key. Less text fits: a message too large is 413 with how many bytes of title, subtitle and body do."
          },
          "idempotency_key": {
            "type": "string",
            "minLength": 1,
            "maxLength": 255,
            "pattern": "^[\\x20-\\x7e]+$",
            "description": "As the Idempotency-Key header of POST .../messages: per app, kept 24 hours."
          },
          "delivery": {
            "type": "string",
            "enum": [
              "push",
              "mailbox"
            ],
            "description": "How the message reaches its devices (mailbox v1 section 1): push (the sealed message rides in the push) or mailbox (the push carries only a handle, the device fetches the sealed message once from POST /v1/mailbox/fetch; up to the app's max_message_bytes). Without it, mailbox when the app has its mailbox enabled. mailbox for an app without it is 422 mailbox_disabled."
          }
        },
        "additionalProperties": false
      },
      "BatchRequest": {
        "type": "object",
        "required": [
          "messages"
        ],
        "additionalProperties": false,
        "properties": {
          "messages": {
            "type": "array",
            "minItems": 1,
            "maxItems": 500,
            "items": {
              "$ref": "#/components/schemas/BatchMessage"
            }
          }
        }
      },
      "BatchResult": {
        "oneOf": [
          {
            "type": "object",
            "required": [
              "status",
              "message"
            ],
            "additionalProperties": false,
            "properties": {
              "status": {
                "const": 202
              },
              "message": {
                "$ref": "#/components/schemas/MessageAccepted"
              },
              "replayed": {
                "type": "boolean",
                "description": "Present (true) when this is the first answer to the message's idempotency_key, replayed."
              }
            },
            "title": "BatchAccepted"
          },
          {
            "type": "object",
            "title": "BatchProblem400",
            "required": [
              "status",
              "problem"
            ],
            "additionalProperties": false,
            "properties": {
              "status": {
                "type": "integer",
                "const": 400
              },
              "problem": {
                "$ref": "#/components/schemas/Problem400"
              },
              "replayed": {
                "type": "boolean",
                "description": "Present (true) when this is the first answer to the message's idempotency_key, replayed."
              }
            }
          },
          {
            "type": "object",
            "title": "BatchProblem404",
            "required": [
              "status",
              "problem"
            ],
            "additionalProperties": false,
            "properties": {
              "status": {
                "type": "integer",
                "const": 404
              },
              "problem": {
                "$ref": "#/components/schemas/Problem404"
              },
              "replayed": {
                "type": "boolean",
                "description": "Present (true) when this is the first answer to the message's idempotency_key, replayed."
              }
            }
          },
          {
            "type": "object",
            "title": "BatchProblem409",
            "required": [
              "status",
              "problem"
            ],
            "additionalProperties": false,
            "properties": {
              "status": {
                "type": "integer",
                "const": 409
              },
              "problem": {
                "$ref": "#/components/schemas/Problem409"
              },
              "replayed": {
                "type": "boolean",
                "description": "Present (true) when this is the first answer to the message's idempotency_key, replayed."
              }
            }
          },
          {
            "type": "object",
            "title": "BatchProblem413",
            "required": [
              "status",
              "problem"
            ],
            "additionalProperties": false,
            "properties": {
              "status": {
                "type": "integer",
                "const": 413
              },
              "problem": {
                "$ref": "#/components/schemas/Problem413"
              },
              "replayed": {
                "type": "boolean",
                "description": "Present (true) when this is the first answer to the message's idempotency_key, replayed."
              }
            }
          },
          {
            "type": "object",
            "title": "BatchProblem422",
            "required": [
              "status",
              "problem"
            ],
            "additionalProperties": false,
            "properties": {
              "status": {
                "type": "integer",
                "const": 422
              },
              "problem": {
                "$ref": "#/components/schemas/Problem422"
              },
              "replayed": {
                "type": "boolean",
                "description": "Present (true) when this is the first answer to the message's idempotency_key, replayed."
              }
            }
          },
          {
            "type": "object",
            "title": "BatchProblem429",
            "required": [
              "status",
              "problem"
            ],
            "additionalProperties": false,
            "properties": {
              "status": {
                "type": "integer",
                "const": 429
              },
              "problem": {
                "$ref": "#/components/schemas/Problem429"
              },
              "replayed": {
                "type": "boolean",
                "description": "Present (true) when this is the first answer to the message's idempotency_key, replayed."
              }
            }
          },
          {
            "type": "object",
            "title": "BatchProblem500",
            "required": [
              "status",
              "problem"
            ],
            "additionalProperties": false,
            "properties": {
              "status": {
                "type": "integer",
                "const": 500
              },
              "problem": {
                "$ref": "#/components/schemas/Problem500"
              },
              "replayed": {
                "type": "boolean",
                "description": "Present (true) when this is the first answer to the message's idempotency_key, replayed."
              }
            }
          },
          {
            "type": "object",
            "title": "BatchProblem503",
            "required": [
              "status",
              "problem"
            ],
            "additionalProperties": false,
            "properties": {
              "status": {
                "type": "integer",
                "const": 503
              },
              "problem": {
                "$ref": "#/components/schemas/Problem503"
              },
              "replayed": {
                "type": "boolean",
                "description": "Present (true) when this is the first answer to the message's idempotency_key, replayed."
              }
            }
          }
        ],
        "description": "What POST .../messages would have answered for this message alone: status 202 with the message, or the problem of that status, typed per status as POST .../messages types it (Problem400, Problem404, ...)."
      },
      "BatchResponse": {
        "type": "object",
        "required": [
          "results"
        ],
        "additionalProperties": false,
        "properties": {
          "results": {
            "type": "array",
            "items": {
              "$ref": "#/components/schemas/BatchResult"
            },
            "description": "One result per message, in request order."
          }
        }
      },
      "APNsDeviceRegistration": {
        "type": "object",
        "required": [
          "user_id",
          "apns_token",
          "environment",
          "key_record"
        ],
        "properties": {
          "user_id": {
            "$ref": "#/components/schemas/Id"
          },
          "platform": {
            "type": "string",
            "const": "apns",
            "description": "apns (the default when absent)."
          },
          "apns_token": {
            "type": "string",
            "pattern": "^([0-9A-Fa-f]{2}){32,100}$",
            "description": "The APNs device token as 64 to 200 hex digits, an even number (whole bytes)."
          },
          "environment": {
            "type": "string",
            "enum": [
              "production",
              "sandbox"
            ]
          },
          "key_record": {
            "$ref": "#/components/schemas/KeyRecord"
          }
        },
        "additionalProperties": false,
        "title": "APNsDeviceRegistration",
        "description": "An iPhone or iPad (platform apns, the default): its APNs token and environment."
      },
      "FCMDeviceRegistration": {
        "title": "FCMDeviceRegistration",
        "description": "An Android device (platforms v1 section 1): its FCM registration token.",
        "type": "object",
        "required": [
          "user_id",
          "platform",
          "fcm_token",
          "key_record"
        ],
        "properties": {
          "user_id": {
            "$ref": "#/components/schemas/Id"
          },
          "platform": {
            "type": "string",
            "const": "fcm"
          },
          "fcm_token": {
            "type": "string",
            "pattern": "^[A-Za-z0-9_:.-]{1,4096}$",
            "description": "The FCM registration token (FirebaseMessaging.getToken())."
          },
          "key_record": {
            "$ref": "#/components/schemas/KeyRecord"
          }
        },
        "additionalProperties": false
      },
      "WebPushSubscription": {
        "title": "WebPushSubscription",
        "description": "The browser's PushSubscription.toJSON(). The endpoint is a capability URL: it must be https with a host name on port 443 (unless the app allows other ports), and resolve to public addresses only (platforms v1 section 1.1); it is never returned.",
        "type": "object",
        "required": [
          "endpoint",
          "keys"
        ],
        "properties": {
          "endpoint": {
            "type": "string",
            "format": "uri",
            "pattern": "^https://",
            "maxLength": 2048
          },
          "keys": {
            "type": "object",
            "required": [
              "p256dh",
              "auth"
            ],
            "properties": {
              "p256dh": {
                "type": "string",
                "pattern": "^[A-Za-z0-9_-]{87}=?$",
                "description": "base64url of the subscription's 65-byte uncompressed P-256 public key."
              },
              "auth": {
                "type": "string",
                "pattern": "^[A-Za-z0-9_-]{22}(==)?$",
                "description": "base64url of the 16-byte authentication secret."
              }
            },
            "additionalProperties": false
          },
          "expirationTime": {
            "type": [
              "number",
              "null"
            ],
            "description": "Accepted and ignored."
          }
        },
        "additionalProperties": false
      },
      "WebPushDeviceRegistration": {
        "title": "WebPushDeviceRegistration",
        "description": "A browser or other Web Push client (platforms v1 section 1): its push subscription.",
        "type": "object",
        "required": [
          "user_id",
          "platform",
          "webpush",
          "key_record"
        ],
        "properties": {
          "user_id": {
            "$ref": "#/components/schemas/Id"
          },
          "platform": {
            "type": "string",
            "const": "webpush"
          },
          "webpush": {
            "$ref": "#/components/schemas/WebPushSubscription"
          },
          "key_record": {
            "$ref": "#/components/schemas/KeyRecord"
          }
        },
        "additionalProperties": false
      },
      "Problem410": {
        "type": "object",
        "title": "Problem410",
        "description": "RFC 9457 problem details for 410 (mailbox v1 section 3): the message was handed out and confirmed or its grace ended (collected), the sender retracted it (retracted), or it expired (expired).",
        "required": [
          "type",
          "title",
          "status",
          "detail",
          "reason"
        ],
        "properties": {
          "type": {
            "type": "string",
            "const": "urn:sealedpush:problem:gone"
          },
          "title": {
            "type": "string"
          },
          "status": {
            "type": "integer",
            "const": 410
          },
          "detail": {
            "type": "string"
          },
          "reason": {
            "type": "string",
            "enum": [
              "collected",
              "retracted",
              "expired"
            ]
          }
        }
      },
      "MailboxFetchRequest": {
        "type": "object",
        "required": [
          "handle"
        ],
        "properties": {
          "handle": {
            "type": "string",
            "maxLength": 1000,
            "description": "The handle of the push: 1.<delivery id>.<token>."
          }
        },
        "additionalProperties": false
      },
      "MailboxEnvelope": {
        "type": "object",
        "required": [
          "envelope",
          "message_id",
          "expires_at"
        ],
        "properties": {
          "envelope": {
            "type": "string",
            "description": "Standard base64 of the wire v1 envelope."
          },
          "message_id": {
            "type": "string",
            "minLength": 1,
            "maxLength": 64
          },
          "expires_at": {
            "$ref": "#/components/schemas/Time"
          }
        },
        "additionalProperties": false
      },
      "MailboxChallengeRequest": {
        "type": "object",
        "required": [
          "app",
          "device_id"
        ],
        "properties": {
          "app": {
            "type": "string",
            "pattern": "^[a-z0-9][a-z0-9._-]{0,63}$"
          },
          "device_id": {
            "$ref": "#/components/schemas/Id"
          }
        },
        "additionalProperties": false
      },
      "MailboxChallenge": {
        "type": "object",
        "required": [
          "challenge_id",
          "sealed",
          "expires_in"
        ],
        "properties": {
          "challenge_id": {
            "type": "string"
          },
          "sealed": {
            "type": "string",
            "description": "Standard base64 of a sealed box of 32 random bytes to the device's public key."
          },
          "expires_in": {
            "type": "integer",
            "const": 60
          }
        },
        "additionalProperties": false
      },
      "MailboxListRequest": {
        "type": "object",
        "required": [
          "challenge_id",
          "answer"
        ],
        "properties": {
          "challenge_id": {
            "type": "string",
            "maxLength": 200
          },
          "answer": {
            "type": "string",
            "maxLength": 200,
            "description": "base64url (no padding) of the 32 bytes the sealed box holds."
          }
        },
        "additionalProperties": false
      },
      "MailboxList": {
        "type": "object",
        "required": [
          "handles"
        ],
        "properties": {
          "handles": {
            "type": "array",
            "maxItems": 100,
            "items": {
              "type": "object",
              "required": [
                "handle",
                "message_id",
                "created_at",
                "expires_at"
              ],
              "properties": {
                "handle": {
                  "type": "string"
                },
                "message_id": {
                  "type": "string"
                },
                "created_at": {
                  "$ref": "#/components/schemas/Time"
                },
                "expires_at": {
                  "$ref": "#/components/schemas/Time"
                }
              },
              "additionalProperties": false
            }
          }
        },
        "additionalProperties": false
      },
      "Problem410EventNotKept": {
        "type": "object",
        "title": "Problem410EventNotKept",
        "description": "RFC 9457 problem details for 410 from GET .../events: after names no event of this app kept now (unknown, or older than the 7 days events are kept), so events after it may be gone; list again without after and reconcile (event_not_kept). A schema of its own, so that generated clients keep a model per status.",
        "required": [
          "type",
          "title",
          "status",
          "detail"
        ],
        "properties": {
          "type": {
            "type": "string",
            "const": "urn:sealedpush:problem:event_not_kept"
          },
          "title": {
            "type": "string"
          },
          "status": {
            "type": "integer",
            "const": 410
          },
          "detail": {
            "type": "string"
          }
        },
        "additionalProperties": false
      }
    },
    "responses": {
      "NoContent": {
        "description": "Done.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          }
        }
      },
      "BadRequest": {
        "description": "The request is malformed (invalid_json, invalid_field, unknown_member).",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem400"
            }
          }
        }
      },
      "Unauthorized": {
        "description": "Missing or unknown API key.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "WWW-Authenticate": {
            "$ref": "#/components/headers/WWW-Authenticate"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem401"
            }
          }
        }
      },
      "Forbidden": {
        "description": "The API key belongs to another app or lacks the scope this route needs.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem403"
            }
          }
        }
      },
      "NotFound": {
        "description": "No such resource in this app.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem404"
            }
          }
        }
      },
      "TooManyDevices": {
        "description": "The user already holds the most devices allowed (100) in this app.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem409"
            }
          }
        }
      },
      "TooLarge": {
        "description": "The body is over 64 KiB.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem413"
            }
          }
        }
      },
      "UnsupportedMediaType": {
        "description": "The body is not sent as Content-Type: application/json.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem415"
            }
          }
        }
      },
      "RateLimited": {
        "description": "The app's rate limit is reached.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          },
          "Retry-After": {
            "$ref": "#/components/headers/Retry-After"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem429"
            }
          }
        }
      },
      "Unavailable": {
        "description": "Queue full, shutting down or database unreachable.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          },
          "Retry-After": {
            "$ref": "#/components/headers/Retry-After"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem503"
            }
          }
        }
      },
      "SendBadRequest": {
        "description": "The message is malformed (invalid_json, invalid_field, unknown_member).",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          },
          "Idempotent-Replayed": {
            "$ref": "#/components/headers/Idempotent-Replayed"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem400"
            }
          }
        }
      },
      "SendNotFound": {
        "description": "No device was ever registered for to.user_id in this app.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          },
          "Idempotent-Replayed": {
            "$ref": "#/components/headers/Idempotent-Replayed"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem404"
            }
          }
        }
      },
      "SendInProgress": {
        "description": "A request with this Idempotency-Key is still being handled.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          },
          "Retry-After": {
            "$ref": "#/components/headers/Retry-After"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem409"
            }
          }
        }
      },
      "SendTooLarge": {
        "description": "The body is over 64 KiB, or the message cannot fit 4096 bytes once sealed.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          },
          "Idempotent-Replayed": {
            "$ref": "#/components/headers/Idempotent-Replayed"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem413"
            }
          }
        }
      },
      "IdempotencyConflict": {
        "description": "This Idempotency-Key was used with a different body in the last 24 hours (idempotency_conflict), or the message would make more deliveries than the app's max_fanout (too_many_deliveries; nothing is stored).",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem422"
            }
          }
        }
      },
      "PublicBadRequest": {
        "description": "The body is not a receipt or report as receipts v1 says.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem400"
            }
          }
        }
      },
      "PublicTooLarge": {
        "description": "The body is over 4096 bytes.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem413"
            }
          }
        }
      },
      "PublicRateLimited": {
        "description": "Too many requests from this source address.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "Retry-After": {
            "$ref": "#/components/headers/Retry-After"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem429"
            }
          }
        }
      },
      "PublicUnavailable": {
        "description": "The database is unreachable or the gateway is shutting down.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "Retry-After": {
            "$ref": "#/components/headers/Retry-After"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem503"
            }
          }
        }
      },
      "Internal": {
        "description": "A fault of the gateway itself (never the answer to bad input); nothing was sent for the request. The detail names the Request-Id to report.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem500"
            }
          }
        }
      },
      "PlatformNotConfigured": {
        "description": "The app does not serve this device's platform (platform_not_configured).",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem422"
            }
          }
        }
      },
      "EventNotKept": {
        "description": "after names no event of this app kept now (event_not_kept): events after it may be gone; list again without after.",
        "headers": {
          "Request-Id": {
            "$ref": "#/components/headers/Request-Id"
          },
          "RateLimit-Limit": {
            "$ref": "#/components/headers/RateLimit-Limit"
          },
          "RateLimit-Remaining": {
            "$ref": "#/components/headers/RateLimit-Remaining"
          },
          "RateLimit-Reset": {
            "$ref": "#/components/headers/RateLimit-Reset"
          }
        },
        "content": {
          "application/problem+json": {
            "schema": {
              "$ref": "#/components/schemas/Problem410EventNotKept"
            }
          }
        }
      }
    }
  }
}

"""##
}
