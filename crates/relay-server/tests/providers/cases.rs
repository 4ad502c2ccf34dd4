//! Each fixture and the answer it records, checked whole.

use bytes::Bytes;
use relay_server::providers::{FinishReason, ProviderError, ToolCall, Usage};

use crate::{Adapter, Outcome, events, fixtures_dir, outcome, sse_body};

/// What a fixture must produce.
pub(crate) struct Case {
    pub(crate) file: &'static str,
    pub(crate) adapter: Adapter,
    /// All `Text` pieces, concatenated.
    pub(crate) text: &'static str,
    /// All `Reasoning` pieces, concatenated.
    pub(crate) reasoning: &'static str,
    pub(crate) end: End,
}

pub(crate) enum End {
    Finished {
        reason: FinishReason,
        /// (id, name, arguments)
        calls: &'static [(&'static str, &'static str, &'static str)],
        /// (input, output, cached input)
        /// input, output, cached input, cache write, reasoning.
        usage: (u64, u64, Option<u64>, Option<u64>, Option<u64>),
    },
    Status {
        status: u16,
        message: &'static str,
        /// The provider's own message, as the user sees it.
        detail: Option<&'static str>,
    },
}

impl Case {
    pub(crate) fn expected(&self) -> Outcome {
        Outcome {
            text: self.text.to_owned(),
            reasoning: self.reasoning.to_owned(),
            end: match &self.end {
                End::Finished {
                    reason,
                    calls,
                    usage,
                } => Ok((
                    *reason,
                    calls
                        .iter()
                        .map(|(id, name, arguments)| ToolCall {
                            id: (*id).to_owned(),
                            name: (*name).to_owned(),
                            arguments: (*arguments).to_owned(),
                        })
                        .collect(),
                    Usage {
                        input_tokens: usage.0,
                        output_tokens: usage.1,
                        cached_input_tokens: usage.2,
                        cache_write_tokens: usage.3,
                        reasoning_tokens: usage.4,
                        server_tool_uses: None,
                    },
                )),
                End::Status {
                    status,
                    message,
                    detail,
                } => Err(ProviderError::Status {
                    status: *status,
                    message: (*message).to_owned(),
                    detail: detail.map(str::to_owned),
                }),
            },
        }
    }
}

pub(crate) fn case(file: &str) -> &'static Case {
    CASES
        .iter()
        .find(|c| c.file == file)
        .unwrap_or_else(|| panic!("no case for {file}"))
}

/// Fixtures that no adapter here should read, and why.
pub(crate) const SKIPPED: &[(&str, &str)] = &[
    (
        "gemini/simonw-llm-gemini__tools_jsonarray.0.jsonarray",
        "Gemini without alt=sse; Relay always asks for SSE",
    ),
    (
        "gemini/simonw-llm-gemini__tools_jsonarray.1.jsonarray",
        "Gemini without alt=sse; Relay always asks for SSE",
    ),
    (
        "gemini/simonw-llm-gemini__tools_jsonarray.2.jsonarray",
        "Gemini without alt=sse; Relay always asks for SSE",
    ),
];

/// Responses API recordings: the `openai_responses` adapter replays them in
/// `responses.rs`.
pub(crate) const RESPONSES_FIXTURES: &[&str] = &[
    "local-lmstudio/vercel-ai__lmstudio-basic.1.chunks.txt",
    "local-lmstudio/vercel-ai__lmstudio-tool-call.1.chunks.txt",
    "local-llamacpp/responses_text.sse",
    "local-llamacpp/responses_tools.sse",
];

/// llama.cpp answered these with HTTP 400 and a JSON body (not SSE): replayed over HTTP below.
pub(crate) const HTTP_ERROR_FIXTURES: &[(&str, &str)] = &[
    (
        "local-llamacpp/chat_error_bad_request.sse",
        "invalid_request_error",
    ),
    (
        "local-llamacpp/chat_error_context_exceeded.sse",
        "exceed_context_size_error",
    ),
];

/// Each fixture's answer, read off the file: the text and reasoning in full, every tool call
/// exactly, the provider's final usage counts and the finish.
#[rustfmt::skip]
pub(crate) const CASES: &[Case] = &[
    Case {
        file: "openai-chat/pydantic-ai__prefect_complex_agent_parallel_tools.0.sse",
        adapter: Adapter::OpenAi,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("call_rI3WKPYvVwlOgCGRjsPP2hEx", "get_country", "{}"),
            ],
            usage: (398, 10, Some(0), None, Some(0)),
        },
    },
    Case {
        file: "openai-chat/pydantic-ai__prefect_complex_agent_parallel_tools.1.sse",
        adapter: Adapter::OpenAi,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("call_NS4iQj14cDFwc0BnrKqDHavt", "get_weather", "{\"city\": \"Mexico City\"}"),
                ("call_SkGkkGDvHQEEk0CGbnAh2AQw", "get_product_name", "{}"),
            ],
            usage: (417, 44, Some(0), None, Some(0)),
        },
    },
    Case {
        file: "openai-chat/pydantic-ai__prefect_complex_agent_parallel_tools.2.sse",
        adapter: Adapter::OpenAi,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("call_QcKhHXwXzqOXJUUHJb1TB2V5", "final_result", "{\"answers\":[{\"label\":\"Capital of the country\",\"answer\":\"Mexico City\"},{\"label\":\"Weather in the capital\",\"answer\":\"Sunny\"},{\"label\":\"Product name\",\"answer\":\"Pydantic AI\"}]}"),
            ],
            usage: (481, 49, Some(0), None, Some(0)),
        },
    },
    Case {
        file: "openai-chat/pydantic-ai__run_stream_sync_real_model.0.sse",
        adapter: Adapter::OpenAi,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", "{\"country\":\"UK\"}"),
            ],
            usage: (53, 15, Some(0), None, Some(0)),
        },
    },
    Case {
        file: "openai-chat/pydantic-ai__run_stream_sync_real_model.1.sse",
        adapter: Adapter::OpenAi,
        text: "The capital of the UK is London.",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Stop,
            calls: &[],
            usage: (78, 9, Some(0), None, Some(0)),
        },
    },
    Case {
        file: "openai-chat/vercel-ai__azure-model-router.1.chunks.txt",
        adapter: Adapter::OpenAi,
        text: "Capital of Denmark.",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Stop,
            calls: &[],
            usage: (15, 78, Some(0), None, Some(64)),
        },
    },
    Case {
        file: "openai-chat/vercel-ai__openai-text.chunks.txt",
        adapter: Adapter::OpenAi,
        text: "**Holiday Name:** Harmony Day\n\n**Date:** Celebrated annually on the first Saturday of May\n\n**Purpose:** Harmony Day is dedicated to fostering understanding, kindness, and unity among diverse communities. It emphasizes celebrating cultural differences while promoting empathy and collaboration.\n\n**Traditions:**\n\n1. **Cultural Potluck Gatherings:** Communities come together to share traditional dishes from their backgrounds, encouraging conversation and curiosity about different cultures.\n\n2. **Story Circles:** People of all ages are encouraged to share stories from their heritage or personal experiences that promote understanding and empathy.\n\n3. **Decorate for Unity:** Public spaces and homes are decorated with symbols representing different cultures—flags, traditional art, and meaningful motifs—to visually celebrate diversity.\n\n4. **Collaborative Art Projects:** Communities create murals or sculptures that symbolize unity and diversity, involving artists and residents of all ages.\n\n5. **Acts of Kindness:** As a central activity, participants perform Small acts of kindness throughout the day, such as volunteering, helping neighbors, or inviting someone new to join festivities.\n\n6. **Music & Dance Festivals:** Local performances showcase a variety of musical styles and dances from different parts of the world, emphasizing shared joy and creativity.\n\n7. **Educational Workshops:** Interactive sessions teach about various cultures’ histories, traditions, and celebrations, fostering respect and knowledge.\n\n**Overall Spirit:** Harmony Day aims to create a sense of global community, reminding everyone that despite our differences, we are all connected through shared human experiences and mutual respect.",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Stop,
            calls: &[],
            usage: (16, 300, Some(0), None, Some(0)),
        },
    },
    Case {
        // Reasoning, then `event: error` {code: "tool_use_failed", status_code: 400}.
        file: "openai-compatible/pydantic-ai__groq_tool_use_failed_error.0.sse",
        adapter: Adapter::OpenAi,
        text: "",
        reasoning: "We need to call the tool with invalid parameters first, then second call with valid args. The user wants us to test error handling. So first call should have wrong parameters (e.g., missing required \"name\" or extra param). The tool expects only \"name\". If we send extra property, that might cause error. Or missing \"name\". We'll do a call with missing name: {}. Then second call with name: \"test\". Let's do that.",
        end: End::Status {
            status: 400,
            message: "tool_use_failed",
            detail: Some(
                "Tool call validation failed: tool call validation failed: parameters for tool get_something_by_name did not match schema: errors: [missing properties: 'name', additionalProperties 'invalid_param' not allowed]",
            ),
        },
    },
    Case {
        // finish_reason "length" first, then a chunk with an `error` {code: 400}: the error wins.
        file: "openai-compatible/pydantic-ai__openrouter_stream_error.0.sse",
        adapter: Adapter::OpenAi,
        text: "",
        reasoning: "We need to respond to a greeting. The user",
        end: End::Status {
            status: 400,
            message: "stream_error",
            detail: Some("Token limit reached"),
        },
    },
    Case {
        // The call chunk comes twice with id "0"; no finish_reason, only [DONE].
        file: "openai-compatible/simonw-llm__openrouter_kimi_variant_a.0.sse",
        adapter: Adapter::OpenAi,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("0", "llm_version", "{}"),
            ],
            usage: (57, 17, Some(0), None, Some(0)),
        },
    },
    Case {
        file: "openai-compatible/simonw-llm__openrouter_kimi_variant_a.1.sse",
        adapter: Adapter::OpenAi,
        text: "The current version of *llm* is **0.fixed-version**.",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Stop,
            calls: &[],
            usage: (107, 15, Some(0), None, Some(0)),
        },
    },
    Case {
        file: "openai-compatible/simonw-llm__openrouter_kimi_variant_c.0.sse",
        adapter: Adapter::OpenAi,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("llm_version:0", "llm_version", "{}"),
            ],
            usage: (56, 12, Some(0), None, Some(0)),
        },
    },
    Case {
        file: "openai-compatible/simonw-llm__openrouter_kimi_variant_c.1.sse",
        adapter: Adapter::OpenAi,
        text: "The installed version of LLM on this system is 0.fixed-version.",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Stop,
            calls: &[],
            usage: (105, 16, Some(0), None, Some(0)),
        },
    },
    Case {
        // The only call has index 1; no usage at all.
        file: "openai-compatible/vercel-ai__anthropic-openai-compat-tool-call.sse",
        adapter: Adapter::OpenAi,
        text: "Reading it.",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("toolu_sanitized", "read_file", "{\"path\": \"a.txt\"}"),
            ],
            usage: (0, 0, None, None, None),
        },
    },
    Case {
        file: "openai-compatible/vercel-ai__deepseek-tool-call.chunks.txt",
        adapter: Adapter::OpenAi,
        text: "",
        reasoning: "The user is asking for the weather in San Francisco. I need to use the weather tool to get this information. Let me invoke the weather tool with the location parameter set to \"San Francisco\".",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "weather", "{\"location\": \"San Francisco\"}"),
            ],
            usage: (339, 83, Some(320), None, Some(39)),
        },
    },
    Case {
        file: "openai-compatible/vercel-ai__groq-tool-call.chunks.txt",
        adapter: Adapter::OpenAi,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("tk85n1k4m", "weather", "{}"),
            ],
            usage: (210, 15, None, None, None),
        },
    },
    Case {
        file: "openai-compatible/vercel-ai__xai-tool-call.chunks.txt",
        adapter: Adapter::OpenAi,
        text: "",
        reasoning: "First, the user is",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("call_55117580", "weather", "{\"location\":\"San Francisco\"}"),
            ],
            // completion_tokens 26 + reasoning_tokens 196: xAI counts reasoning apart.
            usage: (291, 222, Some(290), None, Some(196)),
        },
    },
    Case {
        file: "local-llamacpp/chat_ctx_full_midstream.sse",
        adapter: Adapter::OpenAi,
        text: "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Length,
            calls: &[],
            usage: (4073, 23, Some(26), None, None),
        },
    },
    Case {
        file: "local-llamacpp/chat_text_length_no_usage.sse",
        adapter: Adapter::OpenAi,
        text: "I'm sorry for any confusion. I",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Length,
            calls: &[],
            usage: (0, 0, None, None, None),
        },
    },
    Case {
        file: "local-llamacpp/chat_text_usage.sse",
        adapter: Adapter::OpenAi,
        text: "Je suis en français et in Japanese.\n\nJe suis en français et in Japanese.",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Stop,
            calls: &[],
            usage: (40, 25, Some(5), None, None),
        },
    },
    Case {
        file: "local-llamacpp/chat_tools_parallel.sse",
        adapter: Adapter::OpenAi,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("2xizwCQg3EMySMfJy0Rpkz4Z9vldyRNU", "get_weather", "{\"city\": \"Paris\"}"),
                ("QdkMXcVcNhjuPs6br9oU5evJy7wSWqzE", "get_time", "{\"city\": \"Tournai\"}"),
            ],
            usage: (439, 50, Some(438), None, None),
        },
    },
    Case {
        file: "local-llamacpp/chat_unicode.sse",
        adapter: Adapter::OpenAi,
        text: "Voilà 🎉: étudiante.\n\nPour cela, je ne le raille pas.\n\nPour cela, je ne le raille pas.\n\nPour cela,",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Length,
            calls: &[],
            usage: (64, 40, Some(39), None, None),
        },
    },
    Case {
        // The body ends without a final line end.
        file: "anthropic/anthropic-sdk-python__basic_response.txt",
        adapter: Adapter::Anthropic,
        text: "Hello there!",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Stop,
            calls: &[],
            usage: (11, 6, None, None, None),
        },
    },
    Case {
        // max_tokens cut the tool input mid-JSON: the call cannot run, so it is dropped.
        file: "anthropic/anthropic-sdk-python__incomplete_partial_json_response.txt",
        adapter: Adapter::Anthropic,
        text: "I'll create a comprehensive tax guide for someone with multiple W2s and save it in a file called taxes.txt. Let me do that for you now.",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Length,
            calls: &[],
            usage: (450, 124, Some(0), None, None),
        },
    },
    Case {
        file: "anthropic/anthropic-sdk-python__tool_use_response.txt",
        adapter: Adapter::Anthropic,
        text: "I'll check the current weather in Paris for you.",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", "{\"location\": \"Paris\"}"),
            ],
            usage: (377, 65, Some(0), None, None),
        },
    },
    Case {
        file: "anthropic/pydantic-ai__anthropic_thinking_stream.0.sse",
        adapter: Adapter::Anthropic,
        text: "Here are the basic steps for safely crossing the street:\n\n**At intersections with traffic lights:**\n- Wait for the pedestrian \"Walk\" signal\n- Look both ways before stepping into the street\n- Make eye contact with drivers when possible\n- Stay alert for turning vehicles\n\n**At intersections without signals:**\n- Use crosswalks when available\n- Stop at the curb and look left, right, then left again\n- Wait for a clear gap in traffic\n- Walk briskly but don't run\n- Keep looking for traffic as you cross\n\n**General safety tips:**\n- Put away phones and remove headphones\n- Wear bright or reflective clothing in low light\n- Never assume drivers see you\n- Avoid crossing between parked cars\n- Walk facing traffic when there's no sidewalk\n\n**In busy urban areas:**\n- Follow pedestrian signals strictly\n- Be extra cautious of cyclists in bike lanes\n- Watch for buses and large vehicles with blind spots\n\nThe key is to be visible, alert, and predictable in your movements. Always prioritize safety over speed when crossing streets.",
        reasoning: "This is a straightforward question about pedestrian safety. I should provide clear, helpful advice about how to safely cross a street. This is basic safety information that could help prevent accidents.",
        end: End::Finished {
            reason: FinishReason::Stop,
            calls: &[],
            usage: (43, 282, Some(0), None, None),
        },
    },
    Case {
        file: "anthropic/simonw-llm-anthropic__tools_parallel.0.sse",
        adapter: Adapter::Anthropic,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("toolu_01LtHJmixrs9NcWQkK8hu8hj", "pelican_name_generator", "{}"),
                ("toolu_01N8a4jWyf116qKTMqKKmjyt", "pelican_name_generator", "{}"),
            ],
            usage: (542, 62, Some(0), None, None),
        },
    },
    Case {
        file: "anthropic/simonw-llm-anthropic__tools_parallel.1.sse",
        adapter: Adapter::Anthropic,
        text: "Here are two great names for your pet pelican:\n\n1. **Charles** - A sophisticated and dignified name, perfect for a pelican with personality!\n2. **Sammy** - A friendly and playful name that gives off warm, approachable vibes.\n\nEither of these would make an excellent name for your feathered friend! 🦅",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Stop,
            calls: &[],
            usage: (678, 82, Some(0), None, None),
        },
    },
    Case {
        file: "anthropic/vercel-ai__anthropic-json-tool.1.chunks.txt",
        adapter: Adapter::Anthropic,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("toolu_01KFbKqPYSuAKujiL6mTfzYA", "json", "{\"elements\": [{\"location\": \"San Francisco\", \"temperature\": 58, \"condition\": \"sunny\"}]}"),
            ],
            usage: (849, 47, Some(0), None, None),
        },
    },
    Case {
        file: "anthropic/vercel-ai__anthropic-tool-no-args.chunks.txt",
        adapter: Adapter::Anthropic,
        text: "I'll update the issue list for you.",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "updateIssueList", "{}"),
            ],
            usage: (565, 48, Some(0), None, None),
        },
    },
    Case {
        // input_tokens 1 + cache_read_input_tokens 36.
        file: "local-llamacpp/messages_text.sse",
        adapter: Adapter::Anthropic,
        text: "Je suis le Joueur, je suis le Joueur de la France.",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Stop,
            calls: &[],
            usage: (37, 20, Some(36), None, None),
        },
    },
    Case {
        file: "local-llamacpp/messages_tools.sse",
        adapter: Adapter::Anthropic,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("095jrCdLz4yyRmMUgbbMng3Lm3VBwLB2", "get_weather", "{\"city\": \"Paris\"}"),
                ("ubdDgmfTnVEC4AJANMidS9IGpnSiC3BF", "get_time", "{\"city\": \"Taipei\"}"),
            ],
            usage: (286, 51, Some(266), None, None),
        },
    },
    Case {
        file: "gemini/pydantic-ai__google_iter_stream.0.sse",
        adapter: Adapter::Gemini,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("call_0", "get_capital", "{\"country\":\"France\"}"),
            ],
            usage: (52, 5, None, None, None),
        },
    },
    Case {
        file: "gemini/pydantic-ai__google_iter_stream.1.sse",
        adapter: Adapter::Gemini,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("call_0", "get_temperature", "{\"city\":\"Paris\"}"),
            ],
            usage: (64, 5, None, None, None),
        },
    },
    Case {
        file: "gemini/pydantic-ai__google_iter_stream.2.sse",
        adapter: Adapter::Gemini,
        text: "The temperature in Paris is 30°C.\n",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Stop,
            calls: &[],
            usage: (79, 12, None, None, None),
        },
    },
    Case {
        file: "gemini/pydantic-ai__google_text_stream.0.sse",
        adapter: Adapter::Gemini,
        text: "The capital of France is Paris.\n",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Stop,
            calls: &[],
            usage: (13, 8, None, None, None),
        },
    },
    Case {
        file: "gemini/pydantic-ai__google_tool_call_thought_signature.0.sse",
        adapter: Adapter::Gemini,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("call_0", "get_country", "{}"),
            ],
            usage: (29, 212, None, None, Some(202)),
        },
    },
    Case {
        file: "gemini/pydantic-ai__google_tool_call_thought_signature.1.sse",
        adapter: Adapter::Gemini,
        text: "The capital of Mexico is Mexico City.",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::Stop,
            calls: &[],
            usage: (257, 8, None, None, None),
        },
    },
    Case {
        // Thought text, then one whole call and three streamed with partialArgs; no ids.
        file: "gemini/vercel-ai__google-stream-no-args-tool-call.chunks.txt",
        adapter: Adapter::Gemini,
        text: "",
        reasoning: "**Processing User Requests**\n\nI've started by understanding the user's instructions. Currently, I'm focusing on the initial steps: reading the specified theme using the appropriate tool. Next, I plan to tackle reading the screens, beginning with screen \"A,\" then proceeding with \"B\" and \"C\" in parallel as instructed.\n\n\n",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("call_0", "read_theme", "{}"),
                ("call_1", "read_screen", "{\"id\":\"A\"}"),
                ("call_2", "read_screen", "{\"id\":\"B\"}"),
                ("call_3", "read_screen", "{\"id\":\"C\"}"),
            ],
            usage: (249, 241, None, None, Some(183)),
        },
    },
    Case {
        file: "gemini/vercel-ai__google-stream-tool-call-arguments.chunks.txt",
        adapter: Adapter::Gemini,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("call_0", "getWeather", "{\"location\":\"Boston\"}"),
                ("call_1", "getWeather", "{\"location\":\"San Francisco\"}"),
            ],
            usage: (26, 155, None, None, Some(132)),
        },
    },
    Case {
        file: "gemini/vercel-ai__google-tool-call-gemini3.chunks.txt",
        adapter: Adapter::Gemini,
        text: "",
        reasoning: "",
        end: End::Finished {
            reason: FinishReason::ToolCalls,
            calls: &[
                ("call_0", "weather", "{\"location\":\"San Francisco\"}"),
            ],
            usage: (29, 819, None, None, Some(804)),
        },
    },
];

// ---------------------------------------------------------------------------------------------
// Every fixture, whole

#[test]
fn every_fixture_gives_the_answer_it_records() {
    let mut wrong = Vec::new();
    for case in CASES {
        let body = Bytes::from(sse_body(case.file, case.adapter));
        let got = outcome(&events(case.adapter, vec![body]));
        let expected = case.expected();
        if got != expected {
            wrong.push(format!(
                "{}:\n  got      {got:?}\n  expected {expected:?}",
                case.file
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} fixture(s) wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The table above covers every fixture an adapter reads; a fixture added later must be
/// given an expectation or a reason to skip it.
#[test]
fn every_relevant_fixture_is_in_the_table() {
    let listed = |file: &str| {
        CASES.iter().any(|c| c.file == file)
            || SKIPPED.iter().any(|(f, _)| *f == file)
            || HTTP_ERROR_FIXTURES.iter().any(|(f, _)| *f == file)
            || RESPONSES_FIXTURES.contains(&file)
    };
    let mut missing = Vec::new();
    for dir in [
        "openai-chat",
        "openai-compatible",
        "anthropic",
        "gemini",
        "local-llamacpp",
        "local-lmstudio",
    ] {
        let entries = std::fs::read_dir(fixtures_dir().join(dir)).expect("fixture directory");
        for entry in entries {
            let name = entry
                .expect("entry")
                .file_name()
                .into_string()
                .expect("UTF-8 name");
            let is_stream = [".sse", ".txt", ".jsonarray"]
                .iter()
                .any(|ext| name.ends_with(ext));
            let file = format!("{dir}/{name}");
            if is_stream && name != "SOURCES.md" && !listed(&file) {
                missing.push(file);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "fixtures with no expectation: {missing:?}"
    );
    assert_eq!(CASES.len(), 41);
}
